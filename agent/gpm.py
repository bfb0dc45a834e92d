"""SM activity from GPU Performance Monitoring (Hopper and later): a metric between two samples."""

from __future__ import annotations

import contextlib
from typing import Any

import pynvml


class SmActivity:
    """Keeps the previous GPM sample of each GPU; yields DCGM_FI_PROF_SM_ACTIVE as a 0..1 ratio."""

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._unsupported: set[int] = set()

    def read(self, index: int, handle: Any) -> float | None:
        if index in self._unsupported:
            return None
        try:
            return self._read(index, handle)
        except pynvml.NVMLError:
            # Not offered here (pre-Hopper, MIG, a fake): ask once, then stay quiet.
            self._unsupported.add(index)
            self._forget(index)
            return None

    def _read(self, index: int, handle: Any) -> float | None:
        if index not in self._previous:
            if not pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
            self._previous[index] = pynvml.nvmlGpmSampleGet(handle, pynvml.nvmlGpmSampleAlloc())
            return None  # a rate needs two samples
        current = pynvml.nvmlGpmSampleGet(handle, pynvml.nvmlGpmSampleAlloc())
        query = pynvml.c_nvmlGpmMetricsGet_t()
        query.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        query.numMetrics = 1
        query.sample1, query.sample2 = self._previous[index], current
        query.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
        pynvml.nvmlGpmMetricsGet(query)
        pynvml.nvmlGpmSampleFree(self._previous[index])
        self._previous[index] = current
        metric = query.metrics[0]
        if metric.nvmlReturn != pynvml.NVML_SUCCESS:
            return None
        return round(min(100.0, max(0.0, metric.value)) / 100, 4)

    def _forget(self, index: int) -> None:
        previous = self._previous.pop(index, None)
        if previous is not None:
            with contextlib.suppress(pynvml.NVMLError):  # the GPU is gone; so is its sample
                pynvml.nvmlGpmSampleFree(previous)
