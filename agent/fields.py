"""Field names of a GPU sample, as DCGM-exporter names them, with the unit each carries.

DCGM has no field for NVLink link state (dcgmi reads it through a separate API), so the two
link counts carry a PORTAL_ prefix rather than a made-up DCGM name.
"""

from __future__ import annotations

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent
MEM_COPY_UTIL = "DCGM_FI_DEV_MEM_COPY_UTIL"  # percent
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"  # ratio 0..1, from GPM (Hopper and later)
FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
FB_TOTAL = "DCGM_FI_DEV_FB_TOTAL"  # MiB
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # °C
MEMORY_TEMP = "DCGM_FI_DEV_MEMORY_TEMP"  # °C (HBM)
POWER_LIMIT = "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"  # W
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"  # MHz
MEM_CLOCK = "DCGM_FI_DEV_MEM_CLOCK"  # MHz
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"  # W
TOTAL_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since the driver loaded
THROTTLE_REASONS = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"  # NVML clocks-event bitmask
ECC_SBE = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"  # corrected, volatile
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"  # uncorrected, volatile
REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"  # 0 or 1
REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"  # 0 or 1
PCIE_TX = "DCGM_FI_DEV_PCIE_TX_THROUGHPUT"  # KB/s
PCIE_RX = "DCGM_FI_DEV_PCIE_RX_THROUGHPUT"  # KB/s
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"  # the last Xid seen on this GPU
NVLINK_UP = "PORTAL_NVLINK_LINKS_UP"  # count
NVLINK_DOWN = "PORTAL_NVLINK_LINKS_DOWN"  # count
NVLINK_CRC = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"  # all links, since the driver loaded
NVLINK_REPLAY = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"  # all links
NVLINK_RECOVERY = "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"  # all links
