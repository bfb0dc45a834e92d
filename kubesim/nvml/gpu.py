"""Simulated GPUs whose readings follow the pods placed on them and the faults injected.

Readings are computed from the clock when asked, so they need no background task; energy and
SM activity are integrated between reads (GPM's metrics are rates between two samples of such
counters). Everything is guarded by one lock per node, because NVML is read from the agent's
threads while the simulation's loop places pods.
"""

from __future__ import annotations

import math
import threading
import uuid
from dataclasses import dataclass, field

from kubesim.clock import Clock
from kubesim.cluster import GpuProduct
from kubesim.ib import IbPort, node_ports

IDLE_WATTS = 70.0
CLOCKS_MHZ = {"hopper": (1980, 2619), "ampere": (1410, 1593)}
"""Per family, the SM clock at full boost and the memory clock (an idle SM clocks down)."""
IDLE_SM_MHZ = 345
THROTTLED_SM_SHARE = 0.6
DRIVER_VERSION = "570.86.15"
GPM_FAMILIES = frozenset({"hopper"})
"""GPU Performance Monitoring came with Hopper: older GPUs answer NOT_SUPPORTED."""


@dataclass
class Workload:
    """The pod using a GPU: mean utilisation (0-100) and when it started."""

    pod_uid: str
    util: float
    started: float


@dataclass
class GpuFaults:
    """Fault flags of one GPU; the NVML fake reports these as a real GPU would."""

    lost: bool = False
    thermal: bool = False
    ecc_uncorrected: int = 0
    ecc_corrected: int = 0
    remap_pending: bool = False
    remap_failed: bool = False
    nvlink_down: set[int] = field(default_factory=set)
    nvlink_crc_errors: int = 0
    """CRC flit errors counted on the GPU's first link (replays and recoveries follow them)."""


@dataclass
class SimGpu:
    """One GPU of a node."""

    node: str
    index: int
    product: GpuProduct
    uuid: str
    workload: Workload | None = None
    faults: GpuFaults = field(default_factory=GpuFaults)
    energy_mj: float = 0.0
    busy_s: float = 0.0
    """Seconds of full utilisation since the simulation began (GPM's activity counters)."""
    integrated_at: float = 0.0

    def utilisation(self, now: float) -> int:
        if self.workload is None:
            return 0
        wobble = 4.0 * math.sin((now - self.workload.started) / 7.0 + self.index)
        return int(max(0.0, min(100.0, self.workload.util + wobble)))

    def memory_used_bytes(self, now: float) -> int:
        total = self.product.memory_mib * 2**20
        if self.workload is None:
            return 2 * 2**20
        return int(total * min(0.95, 0.3 + 0.6 * self.workload.util / 100))

    def temperature(self, now: float) -> int:
        return int(32 + 0.45 * self.utilisation(now) + (55 if self.faults.thermal else 0))

    def memory_temperature(self, now: float) -> int:
        """HBM runs a few degrees above the die under load, and overheats with it."""
        return int(30 + 0.5 * self.utilisation(now) + (60 if self.faults.thermal else 0))

    def clocks_mhz(self, now: float) -> tuple[int, int]:
        """(SM, memory) clocks: boost while busy, lower when throttled, down when idle."""
        boost, memory = CLOCKS_MHZ.get(self.product.family, (1410, 1593))
        if self.workload is None:
            return IDLE_SM_MHZ, memory
        return int(boost * THROTTLED_SM_SHARE if self.faults.thermal else boost), memory

    def power_mw(self, now: float) -> int:
        span = self.product.power_watts - IDLE_WATTS
        watts = IDLE_WATTS + span * self.utilisation(now) / 100
        return int(watts * 1000)

    def integrate(self, now: float) -> None:
        """Bring the counters up to `now` (before a read, and before the workload changes)."""
        if now > self.integrated_at:
            elapsed = now - self.integrated_at
            self.energy_mj += self.power_mw(now) * elapsed
            self.busy_s += self.utilisation(now) / 100 * elapsed
            self.integrated_at = now

    def energy(self, now: float) -> int:
        """Total energy in mJ since the simulation began, integrated at each read."""
        self.integrate(now)
        return int(self.energy_mj)

    def busy_seconds(self, now: float) -> float:
        self.integrate(now)
        return self.busy_s

    @property
    def has_gpm(self) -> bool:
        return self.product.family in GPM_FAMILIES


class NodeGpus:
    """The GPUs of one node, its pending Xid events, and what the node's GPUs come with: the
    driver NVML reports and the InfiniBand ports beside them (`kubesim.ib`)."""

    def __init__(self, node: str, product: GpuProduct, count: int, clock: Clock) -> None:
        self.node = node
        self.clock = clock
        self.lock = threading.RLock()
        start = clock.now()
        self.gpus = [
            SimGpu(
                node,
                i,
                product,
                f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, f'{node}/{i}')}",
                integrated_at=start,
            )
            for i in range(count)
        ]
        self.driver = DRIVER_VERSION
        self.ib_ports: list[IbPort] = node_ports(product.family, start)
        self.xid_events: list[tuple[int, int, float]] = []  # (gpu index, xid, time)
        self.xid_cond = threading.Condition(self.lock)

    def healthy_count(self) -> int:
        with self.lock:
            return sum(1 for g in self.gpus if not g.faults.lost)

    def allocate(self, pod_uid: str, count: int, util: float) -> list[int]:
        """Pick free healthy GPUs for a pod (the device plugin's Allocate)."""
        with self.lock:
            free = [g for g in self.gpus if g.workload is None and not g.faults.lost][:count]
            now = self.clock.now()
            for gpu in free:
                gpu.integrate(now)
                gpu.workload = Workload(pod_uid, util, now)
            return [g.index for g in free]

    def release(self, pod_uid: str) -> None:
        with self.lock:
            now = self.clock.now()
            for gpu in self.gpus:
                if gpu.workload is not None and gpu.workload.pod_uid == pod_uid:
                    gpu.integrate(now)
                    gpu.workload = None

    def busy_share(self, now: float) -> float:
        """The node's mean GPU utilisation, 0..1: how hard its jobs drive the fabric."""
        with self.lock:
            return sum(g.utilisation(now) for g in self.gpus) / 100 / max(1, len(self.gpus))

    def post_xid(self, index: int, xid: int) -> None:
        with self.lock:
            self.xid_events.append((index, xid, self.clock.now()))
            self.xid_cond.notify_all()
