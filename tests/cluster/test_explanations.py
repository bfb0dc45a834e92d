"""Which waiting jobs a cycle writes: changed reasons and estimates now, figures now and then."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction

from cluster.apply import (
    ESTIMATE_EVERY_S,
    ESTIMATE_INTERVAL_SHARE,
    ESTIMATE_RESOLUTION_S,
    ESTIMATE_SHARE,
    FIGURES_EVERY_S,
    Explanations,
    _pending,
    _Written,
)
from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from scheduler import Pending, Reason, ReasonCode
from tests.cluster.conftest import SteppedClock
from tests.conftest import World, spec

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NOW = START - timedelta(seconds=30)


def _written(
    code: str = "PRIORITY", ahead: int = 3, start: datetime | None = START, at: float = 0
) -> _Written:
    return _Written(code, {"jobs_ahead": ahead}, start, at)


def _remembering(written: _Written) -> Explanations:
    return Explanations(written={1: written})


def test_a_job_never_written_is_written() -> None:
    assert Explanations().stale(1, _written(), NOW)


def test_the_same_explanation_is_not_written_again() -> None:
    assert not _remembering(_written()).stale(1, _written(at=60), NOW)


def test_a_new_kind_of_reason_is_written_at_once() -> None:
    assert _remembering(_written()).stale(1, _written(code="QUOTA_EXHAUSTED", at=0.1), NOW)
    assert _remembering(_written(code="PREEMPTING")).stale(1, _written(at=0.1), NOW)


def test_moves_among_the_ways_of_waiting_for_gpus_are_rewritten_only_every_few_seconds() -> None:
    explanations = _remembering(_written(code="PRIORITY"))
    assert not explanations.stale(1, _written(code="NO_CAPACITY", at=FIGURES_EVERY_S - 0.1), NOW)
    assert explanations.stale(1, _written(code="NO_CAPACITY", at=FIGURES_EVERY_S), NOW)


@pytest.mark.parametrize(
    ("now", "threshold_s"),
    [
        (NOW, ESTIMATE_RESOLUTION_S),  # half a minute away: the resolution
        (START - timedelta(hours=1), ESTIMATE_SHARE * 3600),  # an hour away: a share of it
    ],
    ids=["near", "far-ahead"],
)
def test_an_estimate_is_written_once_it_moves_by_the_resolution_or_a_share_of_the_wait(
    now: datetime, threshold_s: float
) -> None:
    explanations = _remembering(_written())
    later = ESTIMATE_INTERVAL_SHARE * (START - now).total_seconds()  # long enough since
    nearly = START + timedelta(seconds=threshold_s - 1)
    assert not explanations.stale(1, _written(start=nearly, at=later), now)
    moved = START + timedelta(seconds=threshold_s)
    assert explanations.stale(1, _written(start=moved, at=later), now)


@pytest.mark.parametrize(
    ("left_s", "interval_s"),
    [
        (10, ESTIMATE_EVERY_S),  # due in ten seconds: every few seconds
        (120, ESTIMATE_INTERVAL_SHARE * 120),  # due in two minutes: a share of them
    ],
    ids=["near", "minutes-ahead"],
)
def test_a_moved_estimate_waits_its_interval(left_s: float, interval_s: float) -> None:
    explanations = _remembering(_written())
    now, moved = START - timedelta(seconds=left_s), START + timedelta(minutes=5)
    assert not explanations.stale(1, _written(start=moved, at=interval_s - 0.1), now)
    assert explanations.stale(1, _written(start=moved, at=interval_s), now)


def test_an_estimate_gone_or_new_is_written_at_once() -> None:
    explanations = _remembering(_written())
    # No estimate any more (or one at last): that is news, written at once.
    assert explanations.stale(1, _written(start=None, at=0.1), NOW)
    assert _remembering(_written(start=None)).stale(1, _written(at=0.1), NOW)


def test_figures_alone_are_rewritten_only_every_few_seconds() -> None:
    explanations = _remembering(_written(ahead=3))
    assert not explanations.stale(1, _written(ahead=2, at=FIGURES_EVERY_S - 0.1), NOW)
    assert explanations.stale(1, _written(ahead=2, at=FIGURES_EVERY_S), NOW)


def test_the_refresh_interval_is_the_callers() -> None:
    explanations = Explanations(written={1: _written(ahead=3)}, refresh_s=0.5)
    assert explanations.stale(1, _written(ahead=2, at=0.5), NOW)


def test_jobs_that_stopped_waiting_are_forgotten() -> None:
    explanations = Explanations(written={1: _written(), 2: _written()})
    explanations.keep_only([2, 3])
    assert list(explanations.written) == [2]


@pytest.mark.django_db(transaction=True)
def test_a_cycle_reads_its_intervals_on_the_controllers_clock(world: World) -> None:
    """Figures that changed are written again once `refresh_s` has passed on the clock given,
    however much real time passes."""
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    clock = SteppedClock()
    explanations = Explanations(refresh_s=10.0, clock=clock)

    def cycle(ahead: int) -> int:
        reason = Reason(ReasonCode.PRIORITY, {"jobs_ahead": ahead, "gpus": 1})
        with transaction.atomic():
            _pending({job.pk: Pending(reason, None, None)}, explanations, NOW)
        return Job.unscoped.get(pk=job.pk).pending_figures["jobs_ahead"]

    assert cycle(ahead=5) == 5  # never written: written at once
    clock.advance(9.9)
    assert cycle(ahead=4) == 5  # figures alone: not before refresh_s on the clock
    clock.advance(0.1)
    assert cycle(ahead=3) == 3
