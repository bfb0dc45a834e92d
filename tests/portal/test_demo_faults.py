"""DEMO_FAULTS=1: the demo's injector breaks a busy GPU through kubesim and the fault loop
cordons the node and runs the job again elsewhere; the rotation, its cap on cordoned nodes and
its period, on the test's own clock (nothing sleeps)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import CommandError, call_command

from cluster.models import Node
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from kubesim import Fault
from monitoring.models import Incident
from portal import demo_faults
from portal.demo_faults import DemoFaults
from tests.cluster.conftest import Cluster, cluster  # noqa: F401 (the fixture)
from tests.conftest import World, spec
from tests.monitoring.conftest import run_on
from tests.monitoring.test_faults_loop import Posted, running  # noqa: F401 (the fixture)
from tests.notifications.eager import eager_celery  # noqa: F401 (autouse)


@pytest.mark.django_db(transaction=True)
def test_the_injector_breaks_a_running_jobs_gpu_and_the_fault_loop_cordons(
    cluster: Cluster,  # noqa: F811
    running: tuple[Job, str, Posted, str],  # noqa: F811
) -> None:
    job, node, posted, token = running
    fault = DemoFaults(cluster.sim, every_s=240).inject_next()
    assert fault is not None and (fault.kind, fault.node, fault.xid) == ("gpu-lost", node, 79)
    assert fault.id in cluster.sim.faults.active  # injected in kubesim, lasting

    def delivered(until: Any) -> Any:
        def check() -> bool:
            posted.deliver(token)
            return bool(until())

        return check

    cluster.drive(delivered(lambda: Node.objects.get(name=node).cordoned))
    incident = Incident.objects.get()
    assert incident.action == "reboot" and incident.nodes == [node]
    assert incident.jobs == [job.pk]
    cluster.drive(delivered(lambda: cluster.state(job) == State.RUNNING))
    job.refresh_from_db()
    assert node not in job.placement and job.attempts == 2


class RecordingSim:
    """kubesim's inject/clear calls, kept (the rotation's unit test needs no cluster)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.ids = 0

    def inject_fault(self, kind: str, node: str, gpu: int = 0, xid: int = 0) -> Fault:
        self.ids += 1
        self.calls.append(("inject", (kind, node, gpu, xid)))
        return Fault(self.ids, kind, node, gpu, xid or (79 if kind == "gpu-lost" else 48), 0)

    def clear_faults(self, fault_id: int | None = None, node: str | None = None) -> list[Fault]:
        self.calls.append(("clear", fault_id))
        return []


@pytest.fixture
def busy(world: World) -> Job:
    for name in ("h100-a-0", "h100-a-1", "h100-a-2"):
        Node.objects.create(name=name, gpu_type=world.h100, gpu_capacity=8, ready=True)
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    return run_on(job, {"h100-a-0": 1})  # the injector aims at its GPU


@pytest.mark.django_db
def test_faults_take_turns_each_clearing_the_one_before_every_period(busy: Job) -> None:
    sim = RecordingSim()
    faults = DemoFaults(sim, every_s=240)  # type: ignore[arg-type]
    asked: list[float] = []

    def three_periods(seconds: float) -> bool:  # the test's clock: stop after three periods
        asked.append(seconds)
        return len(asked) > 3

    faults.run(stop=None, wait=three_periods)  # type: ignore[arg-type]
    assert asked == [240, 240, 240, 240]
    assert sim.calls == [
        ("inject", ("gpu-lost", "h100-a-0", 0, 0)),
        ("clear", 1),
        ("inject", ("xid", "h100-a-0", 0, 13)),
        ("clear", 2),
        ("inject", ("ecc-dbe", "h100-a-0", 0, 0)),
    ]


@pytest.mark.django_db
def test_past_the_cap_of_cordoned_nodes_a_lost_gpu_becomes_a_restart(busy: Job) -> None:
    Node.objects.filter(name__in=["h100-a-1", "h100-a-2"]).update(cordoned=True)
    sim = RecordingSim()
    DemoFaults(sim, every_s=240).inject_next()  # type: ignore[arg-type]
    assert sim.calls == [("inject", ("xid", "h100-a-0", 0, 13))]
    Node.objects.filter(name="h100-a-0").update(cordoned=True)  # nothing busy left to break
    assert DemoFaults(sim, every_s=240).inject_next() is None  # type: ignore[arg-type]
    assert len(sim.calls) == 1


def test_the_period_comes_from_the_environment_with_a_floor(monkeypatch: Any) -> None:
    monkeypatch.delenv("DEMO_FAULTS", raising=False)
    assert demo_faults.period_s() is None
    monkeypatch.setenv("DEMO_FAULTS", "1")
    assert demo_faults.period_s() == 240
    monkeypatch.setenv("DEMO_FAULTS_EVERY_S", "60")
    assert demo_faults.period_s() == 60
    monkeypatch.setenv("DEMO_FAULTS_EVERY_S", "5")
    with pytest.raises(ValueError, match="DEMO_FAULTS_EVERY_S: must be at least 10 s, got 5"):
        demo_faults.period_s()
    with pytest.raises(CommandError, match="DEMO_FAULTS_EVERY_S"):
        call_command("demo")  # refused before anything starts
