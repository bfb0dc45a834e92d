"""DEMO_FAULTS=1: the demo's kubesim breaks a busy GPU every DEMO_FAULTS_EVERY_S seconds (240),
so the fault loop can be watched at work: the node's agent reads the fault through its fake
NVML, the controller classifies it, cordons or takes the GPU out, requeues the job, opens an
incident and tells the admins and the job's owner; the job runs again elsewhere.

The faults take turns (`ROTATION`): a lost GPU (Xid 79: the node is cordoned for a reboot), an
Xid 13 (the job restarts), an uncorrected ECC error (the GPU is taken out for a reset). Each
turn first clears the lasting faults of the turn before (the "hardware" is mended; the portal
keeps its GPUs out until an admin returns them from the incident). No more than `MAX_CORDONED`
nodes are cordoned: past that a cordoning fault is replaced by an Xid 13, so a long demo keeps
its cluster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection

from cluster.models import Node
from jobs.models import Job, State
from kubesim import Fault, KubeSim
from monitoring.gpu_owners import placement_owners
from portal.env import env_bool, env_int

log = logging.getLogger(__name__)
ROTATION: tuple[tuple[str, int], ...] = (("gpu-lost", 0), ("xid", 13), ("ecc-dbe", 0))
"""(kubesim fault kind, Xid code where the kind needs one), in turn."""
CORDONING = {"gpu-lost"}
MAX_CORDONED = 2
RESTART = ("xid", 13)
EVERY_S = 240
MIN_EVERY_S = 10


@dataclass(frozen=True)
class Target:
    """A GPU a running job holds."""

    node: str
    gpu: int
    job_id: int


def busy_gpu() -> Target | None:
    """A GPU of the longest-running job on a node not cordoned, or None on an idle cluster."""
    cordoned = set(Node.objects.filter(cordoned=True).values_list("name", flat=True))
    running = Job.unscoped.filter(state=State.RUNNING).order_by("started_at", "id")
    for job_id, placement in running.values_list("id", "placement"):
        for node in sorted(placement or {}):
            if node in cordoned:
                continue
            owners = placement_owners([node]).get(node, {})
            held = sorted(index for index, ref in owners.items() if ref.job_id == job_id)
            return Target(node, held[0] if held else 0, job_id)
    return None


class DemoFaults:
    """Injects the next fault of the rotation into a demo cluster, on each call or each period."""

    def __init__(self, sim: KubeSim, every_s: float) -> None:
        self.sim = sim
        self.every_s = every_s
        self.turn = 0
        self.last: Fault | None = None

    def inject_next(self) -> Fault | None:
        """The next fault on a busy GPU; None (nothing injected) when no job runs."""
        target = busy_gpu()
        if target is None:
            log.info("demo faults: no running job to break this time")
            return None
        kind, xid = ROTATION[self.turn % len(ROTATION)]
        if kind in CORDONING and Node.objects.filter(cordoned=True).count() >= MAX_CORDONED:
            kind, xid = RESTART
        if self.last is not None:  # its own only: faults injected by hand stay
            self.sim.clear_faults(fault_id=self.last.id)
        fault = self.sim.inject_fault(kind, target.node, gpu=target.gpu, xid=xid)
        self.turn += 1
        self.last = fault
        log.warning(
            "demo faults: %s (Xid %s) on %s/%s under job %s",
            kind,
            fault.xid,
            target.node,
            target.gpu,
            target.job_id,
        )
        return fault

    def run(self, stop: threading.Event, wait: Callable[[float], bool] | None = None) -> None:
        """A fault every `every_s` until `stop` (`wait`: stop.wait, or a test's clock)."""
        wait = wait or stop.wait
        while not wait(self.every_s):
            try:
                self.inject_next()
            except ValueError as exc:  # the node or GPU went away meanwhile
                log.warning("demo faults: %s", exc)


def period_s() -> int | None:
    """DEMO_FAULTS_EVERY_S when DEMO_FAULTS=1, else None; ValueError when below the floor."""
    if not env_bool("DEMO_FAULTS"):
        return None
    every = env_int("DEMO_FAULTS_EVERY_S", EVERY_S)
    if every < MIN_EVERY_S:
        raise ValueError(f"DEMO_FAULTS_EVERY_S: must be at least {MIN_EVERY_S} s, got {every}")
    return every


def start_faults(sim: KubeSim, stop: threading.Event, every_s: float) -> threading.Thread:
    """DEMO_FAULTS=1: `DemoFaults.run` in a thread beside the demo's other roles."""
    faults = DemoFaults(sim, every_s)

    def run() -> None:
        try:
            faults.run(stop)
        finally:
            connection.close()  # the thread's own, back before the demo's process ends

    thread = threading.Thread(target=run, name="demo-faults", daemon=True)
    thread.start()
    return thread
