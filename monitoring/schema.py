"""The agent's batch, field by field: what each value must be, and the message when it is not.

Field names are DCGM-exporter's (agent/fields.py documents units); the portal does not import
the agent, so the names are listed here again and tests/monitoring checks the two agree. A batch
may carry one node-level reading (`host`): the node's driver and its InfiniBand ports, whose
fields (agent/ib.py) DCGM does not name.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_TOTAL = "DCGM_FI_DEV_FB_TOTAL"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
TOTAL_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"

MAX_GPU_SAMPLES = 10_000  # per post: an hour's backlog of a big node at a 5 s interval
MAX_XIDS = 1_000
POD_LENGTH = 63 + 1 + 253  # "namespace/name" of the pod holding a GPU, from the kubelet
MAX_GPU_INDEX = 63
COUNTER_MAX = 2**63 - 1
MAX_AGE_SECONDS = 6 * 3600  # the agent buffers an hour; older samples mean a broken clock
MAX_AHEAD_SECONDS = 300


@dataclass(frozen=True)
class Bound:
    """A numeric field's range; `integer` fields refuse fractions."""

    low: float
    high: float
    integer: bool = False

    def message(self) -> str:
        kind = "an integer" if self.integer else "a number"
        return f"must be {kind} between {self.low:g} and {self.high:g}"


PERCENT = Bound(0, 100)
MIB = Bound(0, 2**24)
COUNT = Bound(0, COUNTER_MAX, integer=True)
FLAG = Bound(0, 1, integer=True)
LINKS = Bound(0, 64, integer=True)
KB_PER_S = Bound(0, 2**40)

METRICS: dict[str, Bound] = {
    GPU_UTIL: PERCENT,
    "DCGM_FI_DEV_MEM_COPY_UTIL": PERCENT,
    SM_ACTIVE: Bound(0, 1),
    "DCGM_FI_PROF_SM_OCCUPANCY": Bound(0, 1),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": Bound(0, 1),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": Bound(0, 1),
    "DCGM_FI_PROF_DRAM_ACTIVE": Bound(0, 1),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": Bound(0, 2**42),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": Bound(0, 2**42),
    FB_USED: MIB,
    "DCGM_FI_DEV_FB_FREE": MIB,
    FB_TOTAL: MIB,
    GPU_TEMP: Bound(0, 150),
    "DCGM_FI_DEV_MEMORY_TEMP": Bound(0, 150),
    POWER_USAGE: Bound(0, 5000),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": Bound(0, 5000),
    "DCGM_FI_DEV_SM_CLOCK": Bound(0, 10_000, integer=True),
    "DCGM_FI_DEV_MEM_CLOCK": Bound(0, 10_000, integer=True),
    TOTAL_ENERGY: COUNT,
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": COUNT,
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": COUNT,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": COUNT,
    "DCGM_FI_DEV_ROW_REMAP_PENDING": FLAG,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": FLAG,
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": KB_PER_S,
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": KB_PER_S,
    "DCGM_FI_DEV_XID_ERRORS": Bound(0, 10_000, integer=True),
    "PORTAL_NVLINK_LINKS_UP": LINKS,
    "PORTAL_NVLINK_LINKS_DOWN": LINKS,
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": COUNT,
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": COUNT,
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": COUNT,
}
IB_PORTS_UP = "PORTAL_IB_PORTS_UP"
IB_PORTS_DOWN = "PORTAL_IB_PORTS_DOWN"
IB_DOWN_PORTS = "ib_down"
"""The node-level reading's list of its InfiniBand ports not ACTIVE, each "device/port"."""
MAX_IB_PORTS = 64
IB_PORT_LENGTH = 64 + 1 + 3  # an RDMA device name (IB_DEVICE_NAME_MAX), "/", a port number
IB_PORTS = Bound(0, MAX_IB_PORTS, integer=True)
NODE_METRICS: dict[str, Bound] = {
    IB_PORTS_UP: IB_PORTS,
    IB_PORTS_DOWN: IB_PORTS,
    "PORTAL_IB_RATE_GBPS": Bound(0, 10_000),
    "PORTAL_IB_RCV_BYTES": COUNT,
    "PORTAL_IB_XMIT_BYTES": COUNT,
    "PORTAL_IB_SYMBOL_ERRORS": COUNT,
    "PORTAL_IB_LINK_DOWNED": COUNT,
    "PORTAL_IB_RCV_ERRORS": COUNT,
}
DRIVER = "driver"
DRIVER_LENGTH = 80  # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
INDEX = Bound(0, MAX_GPU_INDEX, integer=True)
BOOT_LENGTH = 64  # the agent's start: a batch's identity is (node, boot, seq)
SEQ = Bound(1, COUNTER_MAX, integer=True)
XID = Bound(1, 10_000, integer=True)
INTERVAL = Bound(0.01, 3600)
