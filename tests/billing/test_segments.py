"""A usage segment per run of a job, exact to the second on a fake clock, written with the
job's own moves: run to the end; preempted and run again; node lost (credited); cancelled."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.models import CreditReason, UsageSegment
from cluster.apply import admit, stop_preempted
from cluster.observe import requeue_or_fail
from jobs.actions import cancel_job, submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from jobs.states import Moves, transition
from tests.billing.conftest import FakeClock, start
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db


def _job(world: World, gpus: int = 4) -> Job:
    return submit_job(world.vision, parse_spec(spec(gpus_per_node=gpus)), acting_user=world.bob)


def _segments(job: Job) -> list[tuple[int, Decimal, str, bool, str]]:
    rows = UsageSegment.objects.for_team(job.team).filter(job=job).order_by("attempt")
    return [(s.attempt, s.gpu_seconds, s.end_state, s.credited, s.credit_reason) for s in rows]


def _run(job: Job, clock: FakeClock, seconds: float) -> None:
    start(job, clock)
    clock.advance(seconds - 5)


def test_a_job_run_to_the_end_counts_its_gpus_from_admission_to_the_end(
    world: World, clock: FakeClock
) -> None:
    job = _job(world, gpus=4)
    clock.advance(30)  # queued time is not usage
    _run(job, clock, 600)
    transition(job, State.SUCCEEDED, "completed", exit_code=0)
    [segment] = UsageSegment.objects.for_team(world.vision).filter(job=job)
    assert (segment.started_at, segment.ended_at) == (job.admitted_at, job.finished_at)
    assert segment.gpu_seconds == Decimal(4 * 600)
    assert (segment.user, segment.queue, segment.gpu_type) == (
        world.bob,
        job.queue,
        world.h100,
    )
    assert (segment.end_state, segment.credited) == (State.SUCCEEDED, False)


def test_a_preempted_job_run_again_has_two_segments_and_the_first_is_credited(
    world: World, clock: FakeClock
) -> None:
    job = _job(world, gpus=2)
    _run(job, clock, 300)
    stop_preempted(job, "preempted (reclaim) for job 99")
    clock.advance(120)  # back in the queue: not counted
    _run(job, clock, 900)
    transition(job, State.SUCCEEDED, "completed", exit_code=0)
    assert _segments(job) == [
        (1, Decimal(600), State.PREEMPTED, True, CreditReason.PREEMPTED),
        (2, Decimal(1800), State.SUCCEEDED, False, ""),
    ]


def test_a_job_whose_node_is_lost_is_credited_for_that_run(world: World, clock: FakeClock) -> None:
    job = _job(world, gpus=8)
    _run(job, clock, 1000)
    moves = Moves()
    requeue_or_fail(job, "pod lost with node node-1 (NodeLost)", moves)
    moves.flush()
    assert job.state == State.QUEUED
    assert _segments(job) == [(1, Decimal(8000), State.NODE_FAILED, True, CreditReason.NODE_LOST)]


def test_a_job_failed_by_an_xid_is_credited(world: World, clock: FakeClock) -> None:
    job = _job(world, gpus=1)
    _run(job, clock, 60)
    transition(job, State.FAILED, "GPU 3 reported Xid 79 (fallen off the bus)")
    assert _segments(job) == [(1, Decimal(60), State.FAILED, True, CreditReason.XID)]


def test_a_job_cancelled_while_queued_has_no_segment(world: World, clock: FakeClock) -> None:
    job = _job(world)
    clock.advance(3600)
    cancel_job(job, acting_user=world.bob)
    assert _segments(job) == []


def test_a_job_cancelled_while_running_is_billed_to_the_cancellation(
    world: World, clock: FakeClock
) -> None:
    job = _job(world, gpus=2)
    _run(job, clock, 45)
    cancel_job(job, acting_user=world.bob)
    assert _segments(job) == [(1, Decimal(90), State.CANCELLED, False, "")]


def test_a_running_job_has_one_open_segment(world: World, clock: FakeClock) -> None:
    job = _job(world)
    _run(job, clock, 100)
    [segment] = UsageSegment.objects.for_team(world.vision).filter(job=job)
    assert (segment.ended_at, segment.gpu_seconds) == (None, Decimal(0))


def test_a_batch_of_moves_writes_its_segments_in_a_constant_number_of_statements(
    world: World, clock: FakeClock
) -> None:
    def statements(count: int) -> int:
        jobs = [_job(world, gpus=1) for _ in range(count)]
        moves = Moves()
        for job in jobs:
            admit(job, {"node-1": 1}, moves)
        moves.flush()
        clock.advance(10)
        moves = Moves()
        for job in jobs:
            transition(job, State.RUNNING, "running", moves=moves)
            transition(job, State.SUCCEEDED, "completed", moves=moves)
        with CaptureQueriesContext(connection) as queries:
            moves.flush()
        return len(queries)

    assert statements(2) == statements(20)
    done = UsageSegment.objects.for_team(world.vision).filter(end_state=State.SUCCEEDED)
    assert sorted({s.gpu_seconds for s in done}) == [Decimal(10)]


def test_a_job_preempted_and_admitted_again_in_one_batch_closes_one_run_and_opens_the_next(
    world: World, clock: FakeClock
) -> None:
    job = _job(world, gpus=2)
    _run(job, clock, 100)
    moves = Moves()
    stop_preempted(job, "preempted (priority) for job 7", moves)
    admit(job, {"node-2": 2}, moves)
    moves.flush()
    assert _segments(job) == [
        (1, Decimal(200), State.PREEMPTED, True, CreditReason.PREEMPTED),
        (2, Decimal(0), "", False, ""),
    ]
