"""max_parallel: which queued sweep members a scheduling cycle must not see."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from jobs.models import Job, State
from jobs.sweeps import (
    limited_sweeps,
    over_parallel,
    parse_sweep,
    submit_sweep,
    within_max_parallel,
)
from scheduler import JobRequest
from tests.conftest import World, spec


def _request(job_id: int, priority: int = 0, submitted: float = 0.0) -> JobRequest:
    return JobRequest(
        id=job_id,
        team="vision",
        member="bob",
        gpu_type="h100-80g",
        nodes=1,
        gpus_per_node=1,
        submit_time=submitted,
        runtime_limit_s=3600.0,
        priority=priority,
    )


def test_it_leaves_max_parallel_less_held_members_in_team_order() -> None:
    queued = [_request(i) for i in (5, 3, 4, 6, 9)]
    member_of = {3: 1, 4: 1, 5: 1, 6: 1, 9: 2}
    hidden = over_parallel(queued, member_of, max_parallel={1: 3}, held={1: 1})
    # Sweep 1 may run 3 and holds 1: its first two queued (3 and 4) stay; sweep 2 has no limit.
    assert sorted(r.id for r in hidden) == [5, 6]


def test_a_sweep_at_its_limit_hides_every_queued_member_and_jobs_outside_sweeps_stay() -> None:
    queued = [_request(i) for i in range(1, 6)]
    hidden = over_parallel(queued, {2: 7, 3: 7}, max_parallel={7: 2}, held={7: 2})
    assert [r.id for r in hidden] == [2, 3]
    assert over_parallel(queued, {2: 7, 3: 7}, max_parallel={7: 2}, held={7: 5}) == hidden


def test_the_members_that_stay_are_the_first_in_the_teams_order() -> None:
    queued = [_request(1, priority=0), _request(2, priority=10), _request(3, submitted=-5.0)]
    hidden = over_parallel(queued, {1: 1, 2: 1, 3: 1}, max_parallel={1: 1}, held={})
    assert sorted(r.id for r in hidden) == [1, 3]  # the higher priority member goes first


class _Queue:
    """What `cluster.snapshot.QueuedRequests` offers, recorded."""

    def __init__(self, requests: list[JobRequest]) -> None:
        self.requests = requests
        self.gone: set[int] = set()
        self.back: set[int] = set()

    def current(self) -> list[JobRequest]:
        return self.requests

    def left(self, job_ids: Iterable[int]) -> None:
        self.gone |= set(job_ids)

    def returned(self, job_ids: Iterable[int]) -> None:
        self.back |= set(job_ids)


@pytest.mark.django_db
def test_the_hidden_members_leave_the_index_for_one_cycle_only(world: World) -> None:
    spec_, plan = parse_sweep({**spec(), "sweep": {"array": 4, "max_parallel": 2}})
    sweep = submit_sweep(world.vision, spec_, plan, acting_user=world.bob)
    ids = list(
        Job.unscoped.filter(sweep=sweep).order_by("sweep_index").values_list("id", flat=True)
    )
    Job.unscoped.filter(pk=ids[0]).update(state=State.RUNNING)
    assert limited_sweeps() == ({i: sweep.pk for i in ids[1:]}, {sweep.pk: 2}, {sweep.pk: 1})

    queue = _Queue([_request(i) for i in ids[1:]])
    assert [r.id for r in within_max_parallel(queue)] == [ids[1]]
    assert queue.gone == queue.back == {ids[2], ids[3]}


@pytest.mark.django_db
def test_sweeps_without_max_parallel_cost_nothing(world: World) -> None:
    spec_, plan = parse_sweep({**spec(), "sweep": {"array": 3}})
    submit_sweep(world.vision, spec_, plan, acting_user=world.bob)
    queue = _Queue([_request(i) for i in Job.unscoped.values_list("id", flat=True)])
    assert within_max_parallel(queue) == queue.requests
    assert not queue.gone and not queue.back
