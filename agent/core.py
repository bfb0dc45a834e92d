"""The node agent: sample every GPU each interval, report Xids at once, never lose a batch.

Besides its GPUs, each sample reads what belongs to the node as a whole (`node_reading`): the
driver NVML reports, and the InfiniBand ports under `ib_root` (sysfs) where the node has any.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import pynvml

from agent import fields
from agent.gpm import Profiler
from agent.ib import DEFAULT_ROOT, ib_fields, read_ports
from agent.nvml import use_library_in_this_thread
from agent.outbox import Backoff, Outbox
from agent.podresources import PodResources
from agent.sampler import read_gpu
from agent.transport import Transport, TransportError
from agent.xid import XidWatcher

log = logging.getLogger(__name__)
DEFAULT_INTERVAL = 5.0
BUFFER_SECONDS = 3600  # an hour of outage at any interval; the portal keeps minutes anyway
IDLE_WAIT = 0.25  # how long the loop sleeps at most, so a stop or an Xid is noticed quickly


class Agent:
    """One node's agent; `run(stop)` loops, `sample_once()` and `flush()` are its two steps."""

    def __init__(
        self,
        node: str,
        transport: Transport,
        *,
        interval: float = DEFAULT_INTERVAL,
        library: object | None = None,
        clock: Callable[[], float] = time.time,
        backoff: Backoff | None = None,
        pod_resources: PodResources | None = None,
        ib_root: str = DEFAULT_ROOT,
    ) -> None:
        self.node, self.interval = node, interval
        self.pod_resources = pod_resources
        self.ib_root = ib_root
        self.outbox = Outbox(node, interval, max_batches=max(1, int(BUFFER_SECONDS / interval)))
        self._transport = transport
        self._library = library
        self._clock = clock
        self._backoff = backoff or Backoff(initial=1.0, maximum=60.0)
        self._retry_at = 0.0
        self._wake = threading.Event()
        self._profiler = Profiler()
        self._uuids: dict[int, str] = {}
        self._last_xid: dict[int, int] = {}
        self._pods_failing = False

    # --- lifetime ---------------------------------------------------------------------------
    def open(self) -> None:
        """Bind this thread to the node's library (when given) and initialise NVML."""
        if self._library is not None:
            use_library_in_this_thread(self._library)
        pynvml.nvmlInit()

    def close(self) -> None:
        pynvml.nvmlShutdown()

    def run(self, stop: threading.Event) -> None:
        self.open()
        watcher = threading.Thread(
            target=self._watch_xids, args=(stop,), name=f"xid-{self.node}", daemon=True
        )
        watcher.start()
        try:
            self._loop(stop)
        finally:
            watcher.join(timeout=5)
            self.close()

    def _loop(self, stop: threading.Event) -> None:
        next_sample = self._clock()
        while not stop.is_set():
            now = self._clock()
            if now >= next_sample:
                self.sample_once()
                next_sample = max(next_sample + self.interval, now)
            self.flush()
            self._wake.wait(min(IDLE_WAIT, max(0.0, next_sample - self._clock())))
            self._wake.clear()
        self.flush()  # a last try, so a clean stop leaves nothing behind that could go out

    # --- the two steps ----------------------------------------------------------------------
    def sample_once(self) -> list[dict[str, Any]]:
        """Read every GPU now and queue the readings; return them."""
        at = round(self._clock(), 3)
        gpus = [self._sample_gpu(index, at) for index in range(pynvml.nvmlDeviceGetCount())]
        owners = self._gpu_pods()
        if owners is not None:
            for sample in gpus:
                if "uuid" in sample:  # "" says the kubelet gave the GPU to no pod
                    sample["pod"] = owners.get(sample["uuid"], "")
        self.outbox.add_samples(gpus)
        self.outbox.set_node_reading(self.node_reading(at))
        return gpus

    def node_reading(self, at: float) -> dict[str, Any]:
        """The node-level fields now: its driver (where NVML tells) and InfiniBand ports."""
        reading: dict[str, Any] = {"at": at}
        with contextlib.suppress(pynvml.NVMLError):  # absent then, as a GPU's unread field
            reading["driver"] = pynvml.nvmlSystemGetDriverVersion()
        reading.update(ib_fields(read_ports(self.ib_root)))
        return reading

    def _gpu_pods(self) -> dict[str, str] | None:
        """{UUID: "namespace/pod"} from the kubelet, or None (the portal then attributes by
        placement) when there is no pod-resources socket or it does not answer."""
        if self.pod_resources is None:
            return None
        try:
            owners = self.pod_resources.gpu_pods()
        except (grpc.RpcError, ValueError) as exc:
            if not self._pods_failing:
                log.warning("pod-resources on %s: %s; attribution by placement", self.node, exc)
            self._pods_failing = True
            return None
        self._pods_failing = False
        return owners

    def flush(self) -> int:
        """Send what waits unless backing off; return the GPU samples the portal accepted."""
        if self._clock() < self._retry_at or not self.outbox.pending():
            return 0
        try:
            sent = self.outbox.send(self._transport)
        except TransportError as exc:
            delay = self._backoff.failed()
            self._retry_at = self._clock() + delay
            log.warning(
                "portal unreachable (%s); %d batches wait, retry in %.1fs",
                exc,
                self.outbox.pending(),
                delay,
            )
            return 0
        self._backoff.succeeded()
        return sent

    def _sample_gpu(self, index: int, at: float) -> dict[str, Any]:
        sample: dict[str, Any] = {"index": index, "at": at}
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError:
            return sample  # fallen off the bus: the Xid already told the portal why
        if index not in self._uuids:
            self._uuids[index] = pynvml.nvmlDeviceGetUUID(handle)
        sample["uuid"] = self._uuids[index]
        sample.update(read_gpu(handle))
        sample.update(self._profiler.read(index, handle))
        if index in self._last_xid:
            sample[fields.XID_ERRORS] = self._last_xid[index]
        return sample

    # --- Xid events -------------------------------------------------------------------------
    def _watch_xids(self, stop: threading.Event) -> None:
        if self._library is not None:
            use_library_in_this_thread(self._library)
        try:
            XidWatcher(self.record_xid).watch(stop)
        except pynvml.NVMLError as exc:
            log.error("no Xid events on %s: %s", self.node, exc)

    def record_xid(self, index: int, xid: int) -> None:
        """Queue an Xid and wake the loop, so it goes out now rather than at the next sample."""
        self._last_xid[index] = xid
        self.outbox.add_xid({"index": index, "xid": xid, "at": round(self._clock(), 3)})
        self._wake.set()
