"""A fake libnvidia-ml: the object pynvml calls as `nvmlLib.<function>(ctypes args...)`.

Each method has the C function's name and signature as pynvml calls it (outputs by `byref`,
strings into `create_string_buffer`s, device handles as opaque pointers) and returns an NVML
return code, so the real pynvml wrappers run unchanged: `agent.nvml.use_library(lib)` plugs it in.
Readings come from the node's simulated GPUs; a GPU fallen off the bus answers GPU_IS_LOST.
GPU Performance Monitoring answers on Hopper only, as on real GPUs: a GPM sample keeps the GPU's
activity counters at the time it was taken, and a metric is their rate between two samples.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any

from kubesim.nvml.ctypes_io import address, field_type, out, set_pointer, write_string
from kubesim.nvml.gpu import NodeGpus, SimGpu

SUCCESS, UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED = 0, 1, 2, 3
NOT_FOUND, INSUFFICIENT_SIZE, TIMEOUT, GPU_IS_LOST = 6, 7, 10, 15
EVENT_XID = 0x8
EVENT_DOUBLE_BIT_ECC = 0x2
GPU_IDLE, SW_THERMAL, HW_THERMAL = 0x1, 0x20, 0x40
CLOCK_SM, CLOCK_MEM = 1, 2
NVLINK_REPLAY, NVLINK_RECOVERY, NVLINK_CRC_FLIT = 0, 1, 2
FI_DEV_MEMORY_TEMP, VALUE_TYPE_UNSIGNED_INT = 82, 1
NVLINKS = {"hopper": 18, "ampere": 12}
GPM_VERSION = 1
GPM_SHARE_OF_BUSY = {
    1: 1.0,  # GRAPHICS_UTIL: the engine is active whenever a kernel runs
    2: 0.92,  # SM_UTIL: most SMs busy in a training step's kernels
    3: 0.45,  # SM_OCCUPANCY: warps resident against the SMs' maximum
    5: 0.6,  # ANY_TENSOR_UTIL: matrix multiplies dominate
    10: 0.4,  # DRAM_BW_UTIL
}
"""GPM metric id → its value at full utilisation, as a share of the GPU's busy time; the
metrics not simulated answer NOT_SUPPORTED in their own entry."""
GPM_MIB_PER_S_AT_FULL = {60: 120_000.0, 61: 120_000.0}
"""NVLINK_TOTAL_RX/TX_PER_SEC at full utilisation, in MiB/s: about a seventh of an H100's
900 GB/s of NVLink, as a data-parallel step's all-reduce takes."""
# Functions a real datacenter GPU answers NOT_SUPPORTED (no fan on SXM boards; no MIG here).
NOT_SUPPORTED_FUNCTIONS = frozenset(
    {
        "nvmlDeviceGetFanSpeed",
        "nvmlDeviceGetFanSpeed_v2",
        "nvmlDeviceGetNumFans",
        "nvmlGpmMigSampleGet",
        "nvmlGpmQueryIfStreamingEnabled",
    }
)


class _EventSet:
    """An nvmlEventSet_t: registered GPUs and a cursor into the node's Xid events."""

    def __init__(self, cursor: int) -> None:
        self.buffer = ctypes.create_string_buffer(8)
        self.cursor = cursor
        self.registered: dict[int, int] = {}  # gpu index -> event type mask


class _GpmSample:
    """An nvmlGpmSample_t: which GPU it was taken of, when, and its busy seconds then."""

    def __init__(self) -> None:
        self.buffer = ctypes.create_string_buffer(8)
        self.taken: tuple[int, float, float] | None = None  # (gpu index, time, busy seconds)


class FakeNvmlLibrary:
    """Stands in for `pynvml.nvmlLib` on one simulated node."""

    def __init__(self, gpus: NodeGpus) -> None:
        self._node = gpus
        self._handles = [ctypes.create_string_buffer(8) for _ in gpus.gpus]
        self._by_address = {ctypes.addressof(h): i for i, h in enumerate(self._handles)}
        self._event_sets: dict[int, _EventSet] = {}
        self._gpm_samples: dict[int, _GpmSample] = {}
        self._initialised = 0

    def __getattr__(self, name: str) -> Callable[..., int]:
        if name in NOT_SUPPORTED_FUNCTIONS:
            return lambda *args: NOT_SUPPORTED
        raise AttributeError(name)  # pynvml turns this into NVML_ERROR_FUNCTION_NOT_FOUND

    def _gpu(self, handle: Any) -> SimGpu | int:
        """The GPU behind a handle, or the return code to give."""
        if not self._initialised:
            return UNINITIALIZED
        index = self._by_address.get(address(handle))
        if index is None:
            return INVALID_ARGUMENT
        gpu = self._node.gpus[index]
        return GPU_IS_LOST if gpu.faults.lost else gpu

    def _read(self, handle: Any, fill: Callable[[SimGpu, float], int | None]) -> int:
        with self._node.lock:
            gpu = self._gpu(handle)
            if isinstance(gpu, int):
                return gpu
            return fill(gpu, self._node.clock.now()) or SUCCESS

    # --- library lifetime -------------------------------------------------------------------
    def nvmlInitWithFlags(self, flags: Any) -> int:
        self._initialised += 1
        return SUCCESS

    def nvmlInit_v2(self) -> int:
        return self.nvmlInitWithFlags(0)

    def nvmlShutdown(self) -> int:
        if not self._initialised:
            return UNINITIALIZED
        self._initialised -= 1
        return SUCCESS

    def nvmlSystemGetDriverVersion(self, buffer: Any, size: Any) -> int:
        return SUCCESS if write_string(buffer, size, self._node.driver) else INSUFFICIENT_SIZE

    def nvmlSystemGetNVMLVersion(self, buffer: Any, size: Any) -> int:
        version = f"12.{self._node.driver}"
        return SUCCESS if write_string(buffer, size, version) else INSUFFICIENT_SIZE

    # --- devices ----------------------------------------------------------------------------
    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        if not self._initialised:
            return UNINITIALIZED
        out(count).value = len(self._node.gpus)
        return SUCCESS

    def nvmlDeviceGetHandleByIndex_v2(self, index: Any, device: Any) -> int:
        i = int(getattr(index, "value", index))
        if not self._initialised:
            return UNINITIALIZED
        if not 0 <= i < len(self._node.gpus):
            return INVALID_ARGUMENT
        if self._node.gpus[i].faults.lost:
            return GPU_IS_LOST
        set_pointer(out(device), ctypes.addressof(self._handles[i]))
        return SUCCESS

    def nvmlDeviceGetHandleByUUID(self, uuid: Any, device: Any) -> int:
        wanted = out(uuid).value if hasattr(out(uuid), "value") else bytes(uuid)
        for gpu in self._node.gpus:
            if gpu.uuid.encode() == wanted:
                return self.nvmlDeviceGetHandleByIndex_v2(gpu.index, device)
        return NOT_FOUND

    def nvmlDeviceGetIndex(self, handle: Any, index: Any) -> int:
        return self._read(handle, lambda g, now: setattr(out(index), "value", g.index))

    def nvmlDeviceGetName(self, handle: Any, buffer: Any, size: Any) -> int:
        return self._read(
            handle,
            lambda g, now: (
                None if write_string(buffer, size, g.product.name) else INSUFFICIENT_SIZE
            ),
        )

    def nvmlDeviceGetUUID(self, handle: Any, buffer: Any, size: Any) -> int:
        return self._read(
            handle, lambda g, now: None if write_string(buffer, size, g.uuid) else INSUFFICIENT_SIZE
        )

    def nvmlDeviceGetUtilizationRates(self, handle: Any, util: Any) -> int:
        def fill(gpu: SimGpu, now: float) -> None:
            busy = gpu.utilisation(now)
            out(util).gpu, out(util).memory = busy, int(busy * 0.6)

        return self._read(handle, fill)

    def _memory(self, handle: Any, memory: Any) -> int:
        def fill(gpu: SimGpu, now: float) -> None:
            total = gpu.product.memory_mib * 2**20
            used = gpu.memory_used_bytes(now)
            target = out(memory)
            target.total, target.used, target.free = total, used, total - used

        return self._read(handle, fill)

    nvmlDeviceGetMemoryInfo = _memory
    nvmlDeviceGetMemoryInfo_v2 = _memory

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: Any, temp: Any) -> int:
        if int(getattr(sensor, "value", sensor)) != 0:
            return INVALID_ARGUMENT
        return self._read(handle, lambda g, now: setattr(out(temp), "value", g.temperature(now)))

    def nvmlDeviceGetFieldValues(self, handle: Any, count: Any, values: Any) -> int:
        """Field values by id; the memory temperature is the one simulated, others answer
        NOT_SUPPORTED in their own entry, as a real GPU does for fields it lacks."""
        entries = out(values)

        def fill(gpu: SimGpu, now: float) -> None:
            for i in range(int(getattr(count, "value", count))):
                entry = entries[i]
                entry.timestamp, entry.latencyUsec = int(now * 1_000_000), 0
                if entry.fieldId == FI_DEV_MEMORY_TEMP:
                    entry.valueType, entry.nvmlReturn = VALUE_TYPE_UNSIGNED_INT, SUCCESS
                    entry.value.uiVal = gpu.memory_temperature(now)
                else:
                    entry.nvmlReturn = NOT_SUPPORTED

        return self._read(handle, fill)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any, limit: Any) -> int:
        return self._read(
            handle, lambda g, now: setattr(out(limit), "value", g.product.power_watts * 1000)
        )

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: Any, clock: Any) -> int:
        kind = int(getattr(clock_type, "value", clock_type))

        def fill(gpu: SimGpu, now: float) -> int | None:
            if kind not in (CLOCK_SM, CLOCK_MEM):
                return NOT_SUPPORTED
            sm, memory = gpu.clocks_mhz(now)
            out(clock).value = sm if kind == CLOCK_SM else memory
            return None

        return self._read(handle, fill)

    def nvmlDeviceGetPowerUsage(self, handle: Any, power: Any) -> int:
        return self._read(handle, lambda g, now: setattr(out(power), "value", g.power_mw(now)))

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any, energy: Any) -> int:
        return self._read(handle, lambda g, now: setattr(out(energy), "value", g.energy(now)))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any, reasons: Any) -> int:
        def fill(gpu: SimGpu, now: float) -> None:
            value = SW_THERMAL | HW_THERMAL if gpu.faults.thermal else 0
            out(reasons).value = value | (GPU_IDLE if gpu.workload is None else 0)

        return self._read(handle, fill)

    nvmlDeviceGetCurrentClocksThrottleReasons = nvmlDeviceGetCurrentClocksEventReasons

    def nvmlDeviceGetTotalEccErrors(
        self, handle: Any, error_type: Any, counter: Any, count: Any
    ) -> int:
        uncorrected = int(getattr(error_type, "value", error_type)) == 1

        def fill(gpu: SimGpu, now: float) -> None:
            out(count).value = (
                gpu.faults.ecc_uncorrected if uncorrected else gpu.faults.ecc_corrected
            )

        return self._read(handle, fill)

    def nvmlDeviceGetRemappedRows(
        self, handle: Any, corr: Any, unc: Any, pending: Any, failure: Any
    ) -> int:
        def fill(gpu: SimGpu, now: float) -> None:
            out(corr).value = gpu.faults.ecc_corrected
            out(unc).value = gpu.faults.ecc_uncorrected
            out(pending).value = int(gpu.faults.remap_pending)
            out(failure).value = int(gpu.faults.remap_failed)

        return self._read(handle, fill)

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: Any, active: Any) -> int:
        index = int(getattr(link, "value", link))

        def fill(gpu: SimGpu, now: float) -> int | None:
            if not 0 <= index < NVLINKS.get(gpu.product.family, 0):
                return INVALID_ARGUMENT if gpu.product.family in NVLINKS else NOT_SUPPORTED
            out(active).value = 0 if index in gpu.faults.nvlink_down else 1
            return None

        return self._read(handle, fill)

    def nvmlDeviceGetNvLinkErrorCounter(
        self, handle: Any, link: Any, counter: Any, value: Any
    ) -> int:
        index, kind = int(getattr(link, "value", link)), int(getattr(counter, "value", counter))

        def fill(gpu: SimGpu, now: float) -> int | None:
            if not 0 <= index < NVLINKS.get(gpu.product.family, 0):
                return INVALID_ARGUMENT if gpu.product.family in NVLINKS else NOT_SUPPORTED
            crc = gpu.faults.nvlink_crc_errors if index == 0 else 0
            # Each CRC error is replayed; one in ten replays needs the link to recover.
            counts = {NVLINK_REPLAY: crc, NVLINK_RECOVERY: crc // 10, NVLINK_CRC_FLIT: crc}
            out(value).value = counts.get(kind, 0)
            return None

        return self._read(handle, fill)

    def nvmlDeviceGetPcieThroughput(self, handle: Any, counter: Any, value: Any) -> int:
        rx = int(getattr(counter, "value", counter)) == 1

        def fill(gpu: SimGpu, now: float) -> None:
            out(value).value = gpu.utilisation(now) * (2400 if rx else 800)  # KB/s

        return self._read(handle, fill)

    # --- GPU Performance Monitoring ---------------------------------------------------------
    def nvmlGpmQueryDeviceSupport(self, handle: Any, support: Any) -> int:
        def fill(gpu: SimGpu, now: float) -> int | None:
            if not gpu.has_gpm:
                return NOT_SUPPORTED
            if out(support).version != GPM_VERSION:
                return INVALID_ARGUMENT
            out(support).isSupportedDevice = 1
            return None

        return self._read(handle, fill)

    def nvmlGpmSampleAlloc(self, sample: Any) -> int:
        if not self._initialised:
            return UNINITIALIZED
        created = _GpmSample()
        self._gpm_samples[ctypes.addressof(created.buffer)] = created
        set_pointer(out(sample), ctypes.addressof(created.buffer))
        return SUCCESS

    def nvmlGpmSampleFree(self, sample: Any) -> int:
        return SUCCESS if self._gpm_samples.pop(address(sample), None) else INVALID_ARGUMENT

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> int:
        target = self._gpm_samples.get(address(sample))
        if target is None:
            return INVALID_ARGUMENT

        def fill(gpu: SimGpu, now: float) -> int | None:
            if not gpu.has_gpm:
                return NOT_SUPPORTED
            target.taken = (gpu.index, now, gpu.busy_seconds(now))
            return None

        return self._read(handle, fill)

    def nvmlGpmMetricsGet(self, query: Any) -> int:
        """Each asked metric from the busy time between the two samples (sample1 first)."""
        wanted = out(query)
        if wanted.version != GPM_VERSION or not 0 < wanted.numMetrics <= len(wanted.metrics):
            return INVALID_ARGUMENT
        first = self._gpm_samples.get(address(wanted.sample1))
        second = self._gpm_samples.get(address(wanted.sample2))
        if first is None or second is None or first.taken is None or second.taken is None:
            return INVALID_ARGUMENT
        (gpu, then, busy_then), (other, now, busy_now) = first.taken, second.taken
        if gpu != other or now <= then:
            return INVALID_ARGUMENT
        busy = min(1.0, max(0.0, (busy_now - busy_then) / (now - then)))
        for i in range(wanted.numMetrics):
            metric = wanted.metrics[i]
            share = GPM_SHARE_OF_BUSY.get(metric.metricId)
            rate = GPM_MIB_PER_S_AT_FULL.get(metric.metricId)
            if share is not None:
                metric.nvmlReturn, metric.value = SUCCESS, round(100 * share * busy, 2)
            elif rate is not None:
                metric.nvmlReturn, metric.value = SUCCESS, round(rate * busy, 1)
            else:
                metric.nvmlReturn, metric.value = NOT_SUPPORTED, 0.0
        return SUCCESS

    # --- events -----------------------------------------------------------------------------
    def nvmlEventSetCreate(self, event_set: Any) -> int:
        if not self._initialised:
            return UNINITIALIZED
        with self._node.lock:
            created = _EventSet(len(self._node.xid_events))
        self._event_sets[ctypes.addressof(created.buffer)] = created
        set_pointer(out(event_set), ctypes.addressof(created.buffer))
        return SUCCESS

    def nvmlDeviceRegisterEvents(self, handle: Any, types: Any, event_set: Any) -> int:
        target = self._event_sets.get(address(event_set))
        if target is None:
            return INVALID_ARGUMENT
        mask = int(getattr(types, "value", types))
        if mask & ~(EVENT_XID | EVENT_DOUBLE_BIT_ECC):
            return NOT_SUPPORTED
        return self._read(handle, lambda g, now: target.registered.__setitem__(g.index, mask))

    def nvmlEventSetWait_v2(self, event_set: Any, data: Any, timeout_ms: Any) -> int:
        target = self._event_sets.get(address(event_set))
        if target is None:
            return INVALID_ARGUMENT
        deadline = time.monotonic() + int(getattr(timeout_ms, "value", timeout_ms)) / 1000
        with self._node.xid_cond:
            while True:
                events = self._node.xid_events
                while target.cursor < len(events):
                    index, xid, _ = events[target.cursor]
                    target.cursor += 1
                    if target.registered.get(index, 0) & EVENT_XID:
                        self._fill_event(out(data), index, xid)
                        return SUCCESS
                left = deadline - time.monotonic()
                if left <= 0:
                    return TIMEOUT
                self._node.xid_cond.wait(left)

    def _fill_event(self, data: Any, index: int, xid: int) -> None:
        data.device = ctypes.cast(
            ctypes.c_void_p(ctypes.addressof(self._handles[index])), field_type(data, "device")
        )
        data.eventType, data.eventData = EVENT_XID, xid
        data.gpuInstanceId = data.computeInstanceId = 0xFFFFFFFF

    nvmlEventSetWait = nvmlEventSetWait_v2

    def nvmlEventSetFree(self, event_set: Any) -> int:
        return SUCCESS if self._event_sets.pop(address(event_set), None) else INVALID_ARGUMENT
