"""Waits on NVML events in its own thread and hands each Xid on at once."""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable
from typing import Any

import pynvml

log = logging.getLogger(__name__)
WAIT_MS = 250  # how often the wait wakes to notice a stop


def _address(handle: Any) -> int:
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


class XidWatcher:
    """Registers every GPU for critical-error events and calls `on_xid(index, xid)` per event."""

    def __init__(self, on_xid: Callable[[int, int], None]) -> None:
        self._on_xid = on_xid
        self._by_address: dict[int, int] = {}

    def register(self) -> Any:
        events = pynvml.nvmlEventSetCreate()
        for index in range(pynvml.nvmlDeviceGetCount()):
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                pynvml.nvmlDeviceRegisterEvents(
                    handle, pynvml.nvmlEventTypeXidCriticalError, events
                )
            except pynvml.NVMLError as exc:
                log.warning("gpu %d: no Xid events (%s)", index, exc)
                continue
            # A lost GPU cannot tell its index any more, so remember it by its handle.
            self._by_address[_address(handle)] = index
        return events

    def watch(self, stop: threading.Event) -> None:
        events = self.register()
        try:
            while not stop.is_set():
                self._wait_once(events)
        finally:
            pynvml.nvmlEventSetFree(events)

    def _wait_once(self, events: Any) -> None:
        try:
            data = pynvml.nvmlEventSetWait(events, WAIT_MS)
        except pynvml.NVMLError_Timeout:
            return
        except pynvml.NVMLError as exc:
            log.warning("event wait failed: %s", exc)
            threading.Event().wait(WAIT_MS / 1000)
            return
        index = self._by_address.get(_address(data.device))
        if index is not None and data.eventType & pynvml.nvmlEventTypeXidCriticalError:
            self._on_xid(index, int(data.eventData))
