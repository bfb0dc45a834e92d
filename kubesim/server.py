"""`KubeSim`: the simulation served over HTTP from a background thread.

`start()` returns once the port is bound; `stop()` closes the server but keeps the simulation, so
a later `start()` serves the same objects on the same port (an API outage, not a new cluster).
Calls from other threads (`inject_fault`, `call`) run on the server's loop, which owns the state.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from aiohttp import web

from kubesim.clock import Clock, ScaledClock
from kubesim.cluster import ClusterSpec, default_cluster, load_cluster
from kubesim.faults import Fault, FaultInjector
from kubesim.handlers import Server
from kubesim.ib import IbSysfs
from kubesim.kubeconfig import write_kubeconfig
from kubesim.nvml.library import FakeNvmlLibrary
from kubesim.podresources import PodDevices, PodResourcesServer
from kubesim.resources import POD
from kubesim.sim import Simulation

T = TypeVar("T")
TICK_S = 0.02


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed (uvicorn[standard] brings it): the same server for less CPU."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class KubeSim:
    """A Kubernetes API emulator with simulated GPU nodes."""

    def __init__(
        self,
        cluster: ClusterSpec | str | Path | None = None,
        *,
        speed: float = 1.0,
        clock: Clock | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        token: str | None = None,
        history_size: int = 20000,
    ) -> None:
        spec = (
            cluster
            if isinstance(cluster, ClusterSpec)
            else (load_cluster(cluster) if cluster is not None else default_cluster())
        )
        self.clock: Clock = clock if clock is not None else ScaledClock(speed)
        self.sim = Simulation(spec, self.clock, history_size)
        self.faults = FaultInjector(self.sim)
        self.token = token
        self.host, self.port = host, port
        self.server = Server(self.sim, self.faults, token, self._kick)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._kicked = False
        self._libraries: dict[str, FakeNvmlLibrary] = {}
        self._pod_resources: dict[str, PodResourcesServer] = {}

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> KubeSim:
        if self._thread is not None:
            raise RuntimeError("kubesim is already running")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(512)
        self.port = sock.getsockname()[1]
        self.server.address = f"{self.host}:{self.port}"
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(sock, ready), name="kubesim", daemon=True
        )
        self._thread.start()
        ready.wait()
        return self

    def _serve(self, sock: socket.socket, ready: threading.Event) -> None:
        loop = _new_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(sock, ready))
        finally:
            loop.close()

    async def _main(self, sock: socket.socket, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        runner = web.AppRunner(
            self.server.app(), access_log=None, handler_cancellation=True, shutdown_timeout=0.5
        )
        await runner.setup()
        await web.SockSite(runner, sock).start()
        ticker = asyncio.create_task(self._ticker())
        ready.set()
        await self._stopping.wait()
        ticker.cancel()
        await runner.cleanup()

    async def _ticker(self) -> None:
        while True:
            self.sim.tick()
            await asyncio.sleep(TICK_S)

    def _kick(self) -> None:
        """After a write, run the controllers soon (once per burst of writes)."""
        if not self._kicked and self._loop is not None:
            self._kicked = True
            self._loop.call_soon(self._kicked_tick)

    def _kicked_tick(self) -> None:
        self._kicked = False
        self.sim.tick()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(lambda: self._stopping.set() if self._stopping else None)
        thread.join(timeout=10)
        self._loop = self._thread = None

    def __enter__(self) -> KubeSim:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the loop that owns the simulation (directly when stopped)."""
        loop = self._loop
        if loop is None or threading.current_thread() is self._thread:
            result = fn()
            self.sim.tick()
            return result
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn())
                self.sim.tick()
            except BaseException as exc:  # handed back to the calling thread
                future.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return future.result(timeout=30)

    def inject_fault(
        self, kind: str, node: str, gpu: int = 0, xid: int = 0, link: int = 0
    ) -> Fault:
        return self.call(lambda: self.faults.inject(kind, node, gpu, xid, link))

    def clear_faults(self, fault_id: int | None = None, node: str | None = None) -> list[Fault]:
        return self.call(lambda: self.faults.clear(fault_id, node))

    def nvml_library(self, node: str) -> FakeNvmlLibrary:
        """The fake libnvidia-ml of a GPU node, to hand to `agent.nvml.use_library`."""
        if node not in self.sim.gpus:
            raise KeyError(f"node {node!r} has no GPUs")
        return self._libraries.setdefault(node, FakeNvmlLibrary(self.sim.gpus[node]))

    def infiniband(self, directory: str | Path) -> IbSysfs:
        """Every GPU node's simulated `/sys/class/infiniband`, under `directory/<node>`
        (`IbSysfs.start` keeps them up to date)."""
        return IbSysfs(self.sim.gpus, directory)

    def pod_resources_socket(self, node: str, directory: str | Path) -> str:
        """The node's kubelet pod-resources socket, served from `directory` (started once)."""
        if node not in self.sim.gpus:
            raise KeyError(f"node {node!r} has no GPUs")
        if node not in self._pod_resources:
            path = str(Path(directory) / f"{node}.sock")
            server = PodResourcesServer(path, lambda: self.call(lambda: self._pod_devices(node)))
            self._pod_resources[node] = server.start()
        return self._pod_resources[node].path

    def _pod_devices(self, node: str) -> list[PodDevices]:
        """What the node's kubelet allocated: each running pod's GPUs, by UUID."""
        gpus = self.sim.gpus[node].gpus
        found = []
        for state in self.sim.kubelet.pods.values():
            if state.node != node or not state.gpus or state.stage not in ("running", "killing"):
                continue
            stored = self.sim.store.get(POD.key, state.namespace, state.name)
            if stored is None:
                continue
            container = stored.obj["spec"]["containers"][0]["name"]
            uuids = tuple(gpus[i].uuid for i in state.gpus)
            found.append(PodDevices(state.namespace, state.name, container, uuids))
        return found

    def stop_pod_resources(self) -> None:
        for server in self._pod_resources.values():
            server.stop()
        self._pod_resources.clear()

    def write_kubeconfig(self, path: str | Path) -> Path:
        return write_kubeconfig(path, self.url, self.token)
