"""A running kubesim, the real Kubernetes client, and a controller driven step by step."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from audit.models import AuditEvent
from cluster.controller import Controller, Timing
from cluster.kube import KubernetesBackend, load_api_client
from cluster.pool import RankedPool
from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from kubesim import KubeSim, ScaledClock
from scheduler import PolicyConfig
from tests.conftest import World, spec

SPEED = 40.0
FAST = Timing(
    debounce_s=0.05,
    cycle_every_s=0.5,
    explain_every_s=0.2,
    refresh_every_s=0.5,
    estimate_every_s=0.2,
    policy_every_s=0.0,
    stops_every_s=0.1,
    reconcile_every_s=2.0,
    renew_every_s=1.0,
)


class SteppedClock:
    """The controllers' monotonic clock: it moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


STEP_S = FAST.debounce_s
"""How far `Cluster.drive` moves the controllers' clock per step: about what an idle step
waits for watch reports, so the controller's periods pass about as fast as the simulation's."""


class SkippingClock(ScaledClock):
    """Simulated time sped up, which a test can also move forward at once (an hour's outage)."""

    def __init__(self, speed: float) -> None:
        super().__init__(speed)
        self.skipped = 0.0

    def advance(self, seconds: float) -> None:
        self.skipped += seconds

    def now(self) -> float:
        return super().now() + self.skipped


@dataclass
class Cluster:
    sim: KubeSim
    clock: SkippingClock
    backend: KubernetesBackend
    controller: Controller
    world: World
    ticks: SteppedClock
    others: list[Controller] = field(default_factory=list)
    """Controllers a test started besides `controller` (successors, standbys): shut down with it."""

    def new_controller(self, timing: Timing = FAST, **kwargs: Any) -> Controller:
        controller = Controller(
            self.backend,
            timing=timing,
            config=PolicyConfig(preemption_grace_s=2.0),
            clock=self.ticks,
            **kwargs,
        )
        self.others.append(controller)
        return controller

    def drive(
        self,
        until: Callable[[], bool],
        *,
        timeout: float = 120.0,
        controller: Controller | None = None,
    ) -> None:
        """Step the controller, its clock moving `STEP_S` a step, until `until()` holds; fail
        with what it saw if it never does (`timeout`: a generous bound, not a measure)."""
        controller = controller or self.controller
        deadline = time.monotonic() + timeout
        if not controller.leading:
            assert controller_leads(controller)
        while time.monotonic() < deadline:
            controller.step()
            self.ticks.advance(STEP_S)
            if until():
                return
        raise AssertionError(
            f"condition not reached in {timeout} s; saw {dict(controller.stats.counts)}"
        )

    def submit(self, runtime_s: float = 2.0, exit_code: int = 0, **overrides: Any) -> Job:
        env = {
            "KUBESIM_RUNTIME_SECONDS": str(runtime_s),
            "KUBESIM_EXIT_CODE": str(exit_code),
            **overrides.pop("env", {}),
        }
        owner = overrides.pop("owner", self.world.bob)
        team = overrides.pop("team_obj", self.world.vision)
        return submit_job(team, parse_spec(spec(env=env, **overrides)), acting_user=owner)

    def state(self, job: Job) -> str:
        job.refresh_from_db()
        return job.state


def audited(job: Job) -> list[tuple[str, int | None]]:
    """(action, team id) of the job's audit events, oldest first."""
    events = AuditEvent.chain.filter(target_type="jobs.job", target_id=str(job.pk))
    return list(events.order_by("seq").values_list("action", "team_id"))


def blocked(pool: RankedPool) -> threading.Event:
    """Hold one of the pool's threads (its only one, in these tests) until the event is set."""
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(10)

    pool.submit((-1.0,), hold)
    assert started.wait(10)
    return release


def controller_leads(controller: Controller) -> bool:
    from cluster import lease

    if lease.try_acquire(controller.identity):
        controller.start_leading()
        return True
    return False


@pytest.fixture
def cluster(transactional_db: None, world: World, tmp_path: Path) -> Iterator[Cluster]:
    clock = SkippingClock(SPEED)
    sim = KubeSim(clock=clock)
    sim.start()
    sim.write_kubeconfig(tmp_path / "kubeconfig")
    backend = KubernetesBackend(load_api_client(str(tmp_path / "kubeconfig")))
    ticks = SteppedClock()
    controller = Controller(
        backend, timing=FAST, config=PolicyConfig(preemption_grace_s=2.0), clock=ticks
    )
    env = Cluster(sim, clock, backend, controller, world, ticks)
    try:
        yield env
    finally:
        for each in (controller, *env.others):
            each.stop_leading(release=True)
            each.followers.shutdown()
            each.kube.shutdown()
        sim.stop()
