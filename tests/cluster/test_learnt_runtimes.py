"""The controller's estimates use runtimes learnt from the jobs that finished, not the limits."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import Node
from cluster.snapshot import LEARNT_FROM_S, QueuedRequests, build_snapshot, learnt_runtimes
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from scheduler import PolicyConfig, schedule
from scheduler.history import RuntimeHistory
from tests.cluster.conftest import SteppedClock
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db

DAY = 24 * 3600
IMAGE = "registry.example/vision/train:1.0"


def _job(world: World, state: State | None = None, **fields: Any) -> Job:
    """A job of bob's in vision (8 GPUs, a day's limit unless overridden), then `fields` set."""
    overrides = {"gpus_per_node": 8, "max_runtime": DAY}
    overrides.update({k: fields.pop(k) for k in ("image", "gpus_per_node", "nodes") if k in fields})
    job = submit_job(world.vision, parse_spec(spec(**overrides)), acting_user=world.bob)
    if state is not None:
        Job.unscoped.filter(pk=job.pk).update(state=state, **fields)
    return Job.unscoped.get(pk=job.pk)


def _ran(world: World, now: datetime, seconds: float, ago: float, **fields: Any) -> Job:
    """A job that succeeded `ago` seconds before `now` after running `seconds`."""
    finished = now - timedelta(seconds=ago)
    started = finished - timedelta(seconds=seconds)
    return _job(
        world,
        State.SUCCEEDED,
        submitted_at=started - timedelta(seconds=5),
        started_at=started,
        finished_at=finished,
        **fields,
    )


def _cluster_busy(world: World, now: datetime, ran_s: float) -> tuple[Job, Job]:
    """One 8-GPU node, held by a job that started `ran_s` ago; another job waits behind it."""
    Node.objects.create(name="n1", gpu_type=world.h100, gpu_allocatable=8, ready=True)
    started = now - timedelta(seconds=ran_s)
    running = _job(
        world, State.RUNNING, placement={"n1": 8}, admitted_at=started, started_at=started
    )
    return running, _job(world)


def test_a_team_whose_jobs_ran_ten_minutes_is_told_ten_minutes_not_its_limit(
    world: World,
) -> None:
    now = timezone.now()
    for ago in (7200, 3600, 1800):
        _ran(world, now, 600, ago)
    running, waiting = _cluster_busy(world, now, ran_s=120)

    snapshot = build_snapshot(now, {})
    assert [r.job.expected_runtime_s for r in snapshot.running] == [600]
    assert [(r.id, r.expected_runtime_s) for r in snapshot.queued] == [(waiting.pk, 600)]
    pending = schedule(snapshot, PolicyConfig()).pending[waiting.pk]
    assert running.started_at is not None
    started = running.started_at.timestamp()
    assert pending.estimated_start == pytest.approx(started + 600)
    assert pending.estimated_start_range is not None
    assert pending.estimated_start_range[1] == pytest.approx(
        started + DAY
    )  # the limit stays the bound


def test_runs_cut_short_teach_nothing_and_the_limit_is_the_estimate(world: World) -> None:
    now = timezone.now()
    for ago, state in ((7200, State.FAILED), (3600, State.CANCELLED), (1800, State.FAILED)):
        finished = now - timedelta(seconds=ago)
        _job(
            world,
            state,
            started_at=finished - timedelta(seconds=600),
            finished_at=finished,
        )
    running, waiting = _cluster_busy(world, now, ran_s=120)

    snapshot = build_snapshot(now, {})
    assert [r.job.expected_runtime_s for r in snapshot.running] == [None]
    pending = schedule(snapshot, PolicyConfig()).pending[waiting.pk]
    assert running.started_at is not None
    assert pending.estimated_start == pytest.approx(running.started_at.timestamp() + DAY)


def test_reading_only_the_newest_runs_of_each_key_learns_what_recording_all_would(
    world: World,
) -> None:
    now = timezone.now()
    runs: list[tuple[str, int, float, int]] = []  # (image, GPUs per node, runtime, limit)
    ago = 100_000.0
    for i in range(90):  # 30 runs of img-0 and of img-1 on 8 GPUs: more than a key keeps
        image = f"img-{i % 2}" if i < 80 else "img-late"
        gpus = 8 if i % 4 else 2
        runtime = 60.0 + 37 * i + (3000 if i % 7 == 0 else 0)
        limit = 3600 * (1 + i % 3) if i % 5 else 2 * 3600 + int(runtime)
        runs.append((image, gpus, runtime, limit))
        _ran(world, now, runtime, ago, image=image, gpus_per_node=gpus, max_runtime=limit)
        ago -= 1000
    for _ in range(2):  # submitted too long ago to count
        _ran(world, now, 5.0, LEARNT_FROM_S, image="img-old", gpus_per_node=8)

    everything = RuntimeHistory()
    for image, gpus, runtime, limit in runs:
        everything.record_run("bob", image, 1, gpus, runtime, limit)
    learnt = learnt_runtimes(now)
    asked = [
        _job(world, image=image, gpus_per_node=gpus)
        for image in ("img-0", "img-1", "img-late", "img-old")
        for gpus in (2, 8, 4)
    ]
    requests = [r for r in QueuedRequests().current() if r.id in {j.pk for j in asked}]
    assert len(requests) == len(asked)
    predictions = [learnt.predict(r) for r in requests]
    assert predictions == [everything.predict(r) for r in requests]
    assert all(p is not None for p in predictions)  # every request had a wider key at least
    assert len({p for p in predictions}) > 3  # and the keys told them apart


def test_runtimes_are_read_in_one_query_once_per_refresh(world: World) -> None:
    clock = SteppedClock()
    queued = QueuedRequests(clock)
    now = timezone.now()
    _ran(world, now, 600, 3600)
    _ran(world, now, 600, 1800)
    waiting = _job(world)

    def learnt_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            snapshot = build_snapshot(timezone.now(), {}, queued)
        assert [r.id for r in snapshot.queued] == [waiting.pk]
        expected.append(snapshot.queued[0].expected_runtime_s)
        return sum("ROW_NUMBER" in q["sql"].upper() for q in queries)

    expected: list[float | None] = []
    assert learnt_queries() == 1
    _ran(world, now, 1200, 60)  # a longer run ends: the next refresh learns it
    clock.advance(QueuedRequests.REFRESH_S - 0.1)
    assert learnt_queries() == 0
    clock.advance(0.1)
    assert learnt_queries() == 1
    assert expected == [600, 600, 800]  # the waiting job's prediction follows the refresh
