"""Idle jobs on a fake clock: detected once the window has passed and not before, never in the
first minutes, not with one busy GPU nor without samples; one warning per idle spell; a stop
policy stops after the grace, audited with its reason, and not before."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from cluster import lease, observe
from cluster.models import Gpu, Node
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from monitoring.idle import IdleRound, Writing, check_idle
from monitoring.idle_policy import IdleRule, set_idle_policy
from monitoring.models import GpuMinute, IdleAction
from notifications.models import Notification
from tests.billing.conftest import FakeClock
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db

START = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)
HOLDER = "test-controller"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    fake.set(START)
    monkeypatch.setattr(timezone, "now", fake)
    return fake


@pytest.fixture
def writing(db: None) -> Writing:
    """The leader's fenced transaction, as the controller's duty gets it."""
    assert lease.try_acquire(HOLDER)
    return partial(observe.writing, HOLDER)


@pytest.fixture
def gpus(world: World) -> list[Gpu]:
    node = Node.objects.create(name="h100-a-1", gpu_type=world.h100, gpu_capacity=8, ready=True)
    return [Gpu.objects.create(node=node, index=i) for i in range(4)]


@pytest.fixture
def job(world: World, clock: FakeClock) -> Job:
    """bob's 2-GPU job, running since START."""
    job = submit_job(world.vision, parse_spec(spec(gpus_per_node=2)), acting_user=world.bob)
    Job.unscoped.filter(pk=job.pk).update(
        state=State.RUNNING, placement={"h100-a-1": 2}, started_at=START, k8s_name="job-1"
    )
    job.refresh_from_db()
    return job


def report(job: Job, gpus: list[Gpu], minutes: range, util: float = 1.0, **busy: float) -> None:
    """Roll-ups of `job` on its first two GPUs for minutes (after START) in `minutes`, at
    `util` % each (12 samples a minute); `busy` overrides one GPU: gpu1=80."""
    for offset in minutes:
        for gpu in gpus[:2]:
            value = busy.get(f"gpu{gpu.index}", util)
            GpuMinute.objects.update_or_create(
                gpu=gpu,
                minute=int(START.timestamp()) + offset * 60,
                defaults={"job": job, "samples": 12, "util_sum": value * 12, "power_sum": 1200.0},
            )


def at(clock: FakeClock, minutes: float, writing: Writing) -> IdleRound:
    clock.set(START)
    clock.advance(minutes * 60)
    return check_idle(writing=writing, now=clock.now)


def warnings(job: Job) -> list[Notification]:
    return list(Notification.objects.filter(user=job.owner, dedupe_key__startswith="idle.job."))


def test_it_warns_once_the_window_has_passed_and_not_before(
    job: Job, gpus: list[Gpu], clock: FakeClock, writing: Writing
) -> None:
    report(job, gpus, range(0, 60))
    # Defaults: under 5 % for 30 minutes, the first 10 not counted: first idle at 9:40.
    assert at(clock, 39.99, writing).warned == []
    assert warnings(job) == []
    assert at(clock, 40, writing).warned == [job.pk]
    (warning,) = warnings(job)
    assert warning.link == f"/jobs/{job.pk}/"
    assert "is idle" in warning.title and "under 5 % for 30 minutes" in warning.body


def test_it_never_counts_the_first_minutes(
    world: World, job: Job, gpus: list[Gpu], clock: FakeClock, writing: Writing
) -> None:
    rule = IdleRule(util_pct=5, minutes=5, first_minutes=20, action="notify", stop_grace_minutes=0)
    set_idle_policy(world.vision, rule, acting_user=world.alice)
    report(job, gpus, range(0, 40))
    # A 5-minute window fits from 9:05, but the first 20 minutes are the job's own.
    assert at(clock, 24, writing).warned == []
    assert at(clock, 25, writing).warned == [job.pk]


def test_it_warns_once_per_idle_spell(
    job: Job, gpus: list[Gpu], clock: FakeClock, writing: Writing
) -> None:
    report(job, gpus, range(0, 50))
    report(job, gpus, range(50, 55), gpu0=60)  # busy for five minutes
    report(job, gpus, range(55, 120))
    assert at(clock, 40, writing).warned == [job.pk]
    for minute in (41, 45, 50):
        assert at(clock, minute, writing).warned == [], minute
    Notification.objects.filter(user=job.owner).update(read=True)  # read: still the same spell
    assert at(clock, 60, writing).warned == []
    assert len(warnings(job)) == 1
    # Busy at 9:50-9:55: the next spell is warned once its window is idle again, at 10:25.
    assert at(clock, 84.99, writing).warned == []
    assert at(clock, 85, writing).warned == [job.pk]
    assert at(clock, 86, writing).warned == []
    assert len(warnings(job)) == 2


def test_a_job_with_one_busy_gpu_is_not_idle(
    job: Job, gpus: list[Gpu], clock: FakeClock, writing: Writing
) -> None:
    report(job, gpus, range(0, 60), gpu1=40)
    assert at(clock, 55, writing).warned == []
    assert warnings(job) == []


def test_a_job_without_samples_is_unknown_not_idle(
    job: Job, gpus: list[Gpu], clock: FakeClock, writing: Writing
) -> None:
    assert at(clock, 55, writing).warned == []
    report(job, gpus, range(30, 60))  # samples only from 9:30: the window is not covered
    assert at(clock, 55, writing).warned == []
    report(job, gpus, range(15, 30))
    assert at(clock, 55, writing).warned == [job.pk]


def test_a_gpu_that_never_reports_keeps_the_job_unknown(
    world: World, gpus: list[Gpu], clock: FakeClock, writing: Writing
) -> None:
    three = submit_job(world.vision, parse_spec(spec(gpus_per_node=3)), acting_user=world.bob)
    Job.unscoped.filter(pk=three.pk).update(state=State.RUNNING, started_at=START)
    report(three, gpus, range(0, 60))  # two of its three GPUs report
    assert at(clock, 55, writing).warned == []


def test_a_stop_policy_stops_after_the_grace_with_an_audited_reason(
    world: World, job: Job, gpus: list[Gpu], clock: FakeClock, writing: Writing
) -> None:
    rule = IdleRule(
        util_pct=5, minutes=30, first_minutes=10, action=IdleAction.STOP, stop_grace_minutes=15
    )
    set_idle_policy(world.vision, rule, acting_user=world.alice)
    report(job, gpus, range(0, 90))
    assert at(clock, 40, writing).warned == [job.pk]
    assert "stops it at 2026-11-03 09:55 UTC" in warnings(job)[0].body
    assert at(clock, 54.99, writing).stopped == []
    job.refresh_from_db()
    assert job.state == State.RUNNING
    assert not AuditEvent.objects.for_user(world.admin).filter(action="job.idle_stop").exists()

    assert at(clock, 55, writing).stopped == [job.pk]
    job.refresh_from_db()
    assert job.state == State.CANCELLED
    assert job.state_reason.startswith("stopped as idle: its GPUs stayed under 5 % for 30 minutes")
    (event,) = AuditEvent.objects.for_user(world.admin).filter(action="job.idle_stop")
    assert event.actor_id is None and event.team_id == world.vision.pk
    assert event.target_id == str(job.pk)
    assert event.after == {
        "state": State.CANCELLED,
        "reason": job.state_reason,
        "policy": rule.as_dict(),
    }
    told = Notification.objects.filter(user=world.bob, title__contains="stopped as idle")
    assert told.count() == 1
    assert at(clock, 56, writing) == IdleRound()  # ended: nothing more to do


def test_a_stop_policy_spares_a_job_that_got_busy_in_the_grace(
    world: World, job: Job, gpus: list[Gpu], clock: FakeClock, writing: Writing
) -> None:
    rule = IdleRule(
        util_pct=5, minutes=30, first_minutes=10, action=IdleAction.STOP, stop_grace_minutes=15
    )
    set_idle_policy(world.vision, rule, acting_user=world.alice)
    report(job, gpus, range(0, 45))
    report(job, gpus, range(45, 90), gpu1=90)
    assert at(clock, 40, writing).warned == [job.pk]
    assert at(clock, 55, writing) == IdleRound()
    job.refresh_from_db()
    assert job.state == State.RUNNING


def test_a_notify_policy_never_stops(
    job: Job, gpus: list[Gpu], clock: FakeClock, writing: Writing
) -> None:
    report(job, gpus, range(0, 300))
    at(clock, 40, writing)
    assert at(clock, 280, writing) == IdleRound()
    job.refresh_from_db()
    assert job.state == State.RUNNING


def test_a_stale_leader_stops_nothing(
    world: World, job: Job, gpus: list[Gpu], clock: FakeClock
) -> None:
    report(job, gpus, range(0, 60))
    with pytest.raises(lease.Lost):
        at(clock, 40, partial(observe.writing, "not-the-leader"))
    assert warnings(job) == []


def test_setting_the_policy_is_audited(world: World) -> None:
    rule = IdleRule(util_pct=10, minutes=60, first_minutes=5, action="stop", stop_grace_minutes=20)
    set_idle_policy(world.vision, rule, acting_user=world.alice)
    (event,) = AuditEvent.objects.for_user(world.admin).filter(action="team.idle_policy")
    assert event.before is None and event.after == rule.as_dict()
    set_idle_policy(world.vision, IdleRule.default(), acting_user=world.alice)
    second = (
        AuditEvent.objects.for_user(world.admin)
        .filter(action="team.idle_policy")
        .order_by("seq")
        .last()
    )
    assert second is not None and second.before == rule.as_dict()
    assert second.after == IdleRule.default().as_dict()
