"""max_parallel through the scheduler: a cycle never admits more members of a sweep than it
allows. These fail until `cluster.snapshot.build_snapshot` hides the members over the limit
(`jobs.sweeps.within_max_parallel`, the one line its docstring in jobs/sweeps.py names)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from cluster.models import Node
from cluster.snapshot import QueuedRequests, build_snapshot
from jobs.models import HOLDING_STATES, Job, State
from jobs.sweeps import parse_sweep, submit_sweep
from quotas.models import GpuType
from scheduler import PolicyConfig, decide
from tests.cluster.conftest import Cluster
from tests.conftest import World, spec


def _sweep(world: World, size: int, max_parallel: int, **overrides: object) -> list[int]:
    body = {**spec(**overrides), "sweep": {"array": size, "max_parallel": max_parallel}}
    spec_, plan = parse_sweep(body)
    sweep = submit_sweep(world.vision, spec_, plan, acting_user=world.bob)
    return list(
        Job.unscoped.filter(sweep=sweep).order_by("sweep_index").values_list("id", flat=True)
    )


def _node(name: str, gpu_type: GpuType) -> None:
    Node.objects.create(name=name, gpu_type=gpu_type, gpu_capacity=8, gpu_allocatable=8, ready=True)


@pytest.mark.django_db
def test_a_cycle_admits_at_most_max_parallel_members(world: World) -> None:
    _node("n1", world.h100)
    members = _sweep(world, size=6, max_parallel=2)
    queued = QueuedRequests()
    snapshot = build_snapshot(timezone.now(), {}, queued)
    decisions = decide(snapshot, queued.index, PolicyConfig(), explain=True)
    assert sorted(a.job_id for a in decisions.admissions) == members[:2]

    # With one member holding GPUs, one more may start; the hidden ones come back next cycle.
    Job.unscoped.filter(pk=members[0]).update(state=State.RUNNING, placement={"n1": 1})
    snapshot = build_snapshot(timezone.now(), {}, queued)
    decisions = decide(snapshot, queued.index, PolicyConfig(), explain=True)
    assert [a.job_id for a in decisions.admissions] == [members[1]]
    assert {r.id for r in queued.current()} == set(members[1:])


pytestmark_controller = pytest.mark.django_db(transaction=True)


@pytestmark_controller
def test_the_controller_runs_a_sweep_max_parallel_at_a_time(cluster: Cluster) -> None:
    cluster.drive(lambda: Node.objects.filter(ready=True).count() == 12)
    env = {"KUBESIM_RUNTIME_SECONDS": "2", "KUBESIM_EXIT_CODE": "0"}
    members = _sweep(cluster.world, size=5, max_parallel=2, env=env)
    most = 0

    def done() -> bool:
        nonlocal most
        holding = Job.unscoped.filter(pk__in=members, state__in=HOLDING_STATES).count()
        most = max(most, holding)
        return Job.unscoped.filter(pk__in=members, state=State.SUCCEEDED).count() == 5

    cluster.drive(done)
    assert most == 2
