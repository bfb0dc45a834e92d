"""Profiling fields from GPU Performance Monitoring (Hopper and later): rates between two samples.

DCGM's profiling fields (`DCGM_FI_PROF_*`) are ratios 0..1; GPM gives the same quantities as
percentages over the time between two GPM samples, so each read takes a new sample and measures
against the previous one of that GPU. A GPU without GPM (Ampere and older, or under MIG) reports
none of them: they are left out of its samples, never made up from other readings.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pynvml

from agent import fields

METRICS = {
    pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL: fields.GR_ENGINE_ACTIVE,
    pynvml.NVML_GPM_METRIC_SM_UTIL: fields.SM_ACTIVE,
    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: fields.SM_OCCUPANCY,
    pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: fields.TENSOR_ACTIVE,
    pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: fields.DRAM_ACTIVE,
}
"""GPM metric → the DCGM profiling field it gives (a percentage, sent as a ratio 0..1)."""
RATES = {
    pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: fields.NVLINK_RX,
    pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: fields.NVLINK_TX,
}
"""GPM metric → the DCGM throughput field it gives (MiB/s, sent as bytes/s)."""
MIB = 2**20
ABSENT = (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)


class Profiler:
    """Keeps the previous GPM sample of each GPU; `read` gives the profiling fields since."""

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._unsupported: set[int] = set()

    def read(self, index: int, handle: Any) -> dict[str, float]:
        if index in self._unsupported:
            return {}
        try:
            return self._read(index, handle)
        except pynvml.NVMLError as exc:
            if exc.value in ABSENT:  # not offered here: ask once, then stay quiet
                self._unsupported.add(index)
            self._forget(index)  # otherwise start over from the next sample
            return {}

    def _read(self, index: int, handle: Any) -> dict[str, float]:
        if index not in self._previous:
            if not pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
            self._previous[index] = self._sample(handle)
            return {}  # a rate needs two samples
        current = self._sample(handle)
        previous, self._previous[index] = self._previous[index], current
        try:
            return _metrics(previous, current)
        finally:
            pynvml.nvmlGpmSampleFree(previous)

    @staticmethod
    def _sample(handle: Any) -> Any:
        sample = pynvml.nvmlGpmSampleAlloc()
        try:
            return pynvml.nvmlGpmSampleGet(handle, sample)
        except pynvml.NVMLError:
            pynvml.nvmlGpmSampleFree(sample)
            raise

    def _forget(self, index: int) -> None:
        previous = self._previous.pop(index, None)
        if previous is not None:
            with contextlib.suppress(pynvml.NVMLError):  # the GPU is gone; so is its sample
                pynvml.nvmlGpmSampleFree(previous)


def _metrics(previous: Any, current: Any) -> dict[str, float]:
    query = pynvml.c_nvmlGpmMetricsGet_t()
    query.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    asked = [*METRICS, *RATES]
    query.numMetrics = len(asked)
    query.sample1, query.sample2 = previous, current
    for i, metric_id in enumerate(asked):
        query.metrics[i].metricId = metric_id
    pynvml.nvmlGpmMetricsGet(query)
    found: dict[str, float] = {}
    for i, metric_id in enumerate(asked):
        metric = query.metrics[i]
        if metric.nvmlReturn != pynvml.NVML_SUCCESS:
            continue  # this GPU does not measure it
        if metric_id in METRICS:
            found[METRICS[metric_id]] = round(min(100.0, max(0.0, metric.value)) / 100, 4)
        else:
            found[RATES[metric_id]] = round(max(0.0, metric.value) * MIB)
    return found
