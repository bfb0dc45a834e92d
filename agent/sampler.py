"""Read one GPU through pynvml into a sample of DCGM-named fields; what a GPU lacks is absent."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import pynvml

from agent import fields as f

log = logging.getLogger(__name__)
MIB = 2**20
Sample = dict[str, Any]


def _try(read: Callable[[], Any]) -> Any:
    """The reading, or None where this GPU or driver does not offer it."""
    try:
        return read()
    except pynvml.NVMLError:
        return None


def _utilisation(handle: Any, sample: Sample) -> None:
    rates = _try(lambda: pynvml.nvmlDeviceGetUtilizationRates(handle))
    if rates is not None:
        sample[f.GPU_UTIL] = rates.gpu
        sample[f.MEM_COPY_UTIL] = rates.memory


def _memory(handle: Any, sample: Sample) -> None:
    memory = _try(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle))
    if memory is not None:
        sample[f.FB_USED] = memory.used // MIB
        sample[f.FB_FREE] = memory.free // MIB
        sample[f.FB_TOTAL] = memory.total // MIB


def _scalars(handle: Any, sample: Sample) -> None:
    readings: dict[str, Callable[[], Any]] = {
        f.GPU_TEMP: lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        f.POWER_USAGE: lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000,
        f.POWER_LIMIT: lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,
        f.SM_CLOCK: lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        f.MEM_CLOCK: lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        f.TOTAL_ENERGY: lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle),
        f.THROTTLE_REASONS: lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
        f.ECC_SBE: lambda: pynvml.nvmlDeviceGetTotalEccErrors(
            handle, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC
        ),
        f.ECC_DBE: lambda: pynvml.nvmlDeviceGetTotalEccErrors(
            handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
        ),
        f.PCIE_TX: lambda: pynvml.nvmlDeviceGetPcieThroughput(
            handle, pynvml.NVML_PCIE_UTIL_TX_BYTES
        ),
        f.PCIE_RX: lambda: pynvml.nvmlDeviceGetPcieThroughput(
            handle, pynvml.NVML_PCIE_UTIL_RX_BYTES
        ),
    }
    for name, read in readings.items():
        value = _try(read)
        if value is not None:
            sample[name] = value


FIELD_VALUES = {pynvml.NVML_FI_DEV_MEMORY_TEMP: f.MEMORY_TEMP}
"""Readings NVML offers only as field values (`nvmlDeviceGetFieldValues`), each with its own
return code: a field this GPU lacks answers NOT_SUPPORTED in its entry, and is left out."""
_VALUE_MEMBERS = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
}


def _field_values(handle: Any, sample: Sample) -> None:
    entries = _try(lambda: pynvml.nvmlDeviceGetFieldValues(handle, list(FIELD_VALUES)))
    for entry in entries or ():
        member = _VALUE_MEMBERS.get(entry.valueType)
        if entry.nvmlReturn == pynvml.NVML_SUCCESS and member and entry.fieldId in FIELD_VALUES:
            sample[FIELD_VALUES[entry.fieldId]] = getattr(entry.value, member)


def _remapped_rows(handle: Any, sample: Sample) -> None:
    rows = _try(lambda: pynvml.nvmlDeviceGetRemappedRows(handle))
    if rows is not None:
        sample[f.REMAP_PENDING] = int(bool(rows[2]))
        sample[f.REMAP_FAILURE] = int(bool(rows[3]))


NVLINK_ERRORS = {
    f.NVLINK_CRC: pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
    f.NVLINK_REPLAY: pynvml.NVML_NVLINK_ERROR_DL_REPLAY,
    f.NVLINK_RECOVERY: pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
}


def _nvlinks(handle: Any, sample: Sample) -> None:
    up = down = 0
    errors = dict.fromkeys(NVLINK_ERRORS, 0)
    counted: set[str] = set()
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            active = pynvml.nvmlDeviceGetNvLinkState(handle, link)
        except pynvml.NVMLError:
            break  # past the last link of this GPU, or no NVLink at all
        up, down = (up + 1, down) if active else (up, down + 1)
        for name, counter in NVLINK_ERRORS.items():
            value = _try(partial(pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter))
            if value is not None:
                errors[name] += value
                counted.add(name)
    if up or down:
        sample[f.NVLINK_UP], sample[f.NVLINK_DOWN] = up, down
        sample.update((name, total) for name, total in errors.items() if name in counted)


READERS: tuple[Callable[[Any, Sample], None], ...] = (
    _utilisation,
    _memory,
    _scalars,
    _field_values,
    _remapped_rows,
    _nvlinks,
)


def read_gpu(handle: Any) -> Sample:
    """Every field this GPU answers; a GPU that fell off the bus answers none."""
    sample: Sample = {}
    for reader in READERS:
        reader(handle, sample)
    return sample
