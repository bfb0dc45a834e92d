"""The daily roll-up (`UsageDay`) always equals summing the segments: the same report both ways
for scripted lifecycles, a price change mid-month, credits, queue multipliers and open segments."""

from __future__ import annotations

import importlib
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps
from django.db.models import Sum

from billing.actions import set_gpu_price, set_queue_multiplier
from billing.models import UsageDay, UsageSegment
from billing.prices import PriceBook
from billing.usage import Period, fold, month_period, usage_report, visible_segments
from cluster.apply import admit
from jobs.actions import submit_job
from jobs.models import State
from jobs.spec import parse_spec
from jobs.states import Moves, transition
from quotas.models import Queue
from tests.billing.conftest import FakeClock, ran, start
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db

GROUPINGS = [
    (),
    ("team",),
    ("team", "gpu_type"),
    ("user",),
    ("queue", "gpu_type"),
    ("team", "user", "gpu_type", "queue"),
]
PERIODS = [
    month_period("2026-10"),
    month_period("2026-11"),
    Period(date(2026, 11, 14), date(2026, 11, 18)),  # across the price change
    Period(date(2026, 11, 30), date(2026, 12, 1)),  # today, with the open segment
]


def _at(day: int, hour: int = 0, month: int = 11, minute: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


@pytest.fixture
def lifecycles(world: World, clock: FakeClock) -> World:
    """Runs across midnight, the price change (16 Nov) and the month's start; credited ends
    (node lost, preempted); a cheaper queue; a run still going at the report's moment."""
    set_gpu_price(world.h100, date(2026, 11, 16), Decimal("4.0"), acting_user=world.admin)
    low = Queue.objects.for_team(world.vision).get(name="low")
    set_queue_multiplier(low, Decimal("0.333"), acting_user=world.admin)
    ran(world.vision, world.bob, clock, _at(15, 12, minute=7), _at(17, 3, minute=13), gpus=2)
    ran(world.vision, world.alice, clock, _at(20, 8), _at(20, 18), queue="low")
    ran(world.vision, world.alice, clock, _at(20, 9), _at(21, 1, minute=59), queue="low", gpus=3)
    lost = "pod lost with node node-1 (NodeLost)"
    ran(
        world.vision,
        world.bob,
        clock,
        _at(21, 8),
        _at(21, 9),
        gpus=4,
        ends_in=State.NODE_FAILED,
        reason=lost,
    )
    ran(world.nlp, world.carol, clock, _at(22, 1), _at(22, 4), ends_in=State.PREEMPTED)
    ran(world.nlp, world.carol, clock, _at(23, 23), _at(24, 0, minute=1))
    ran(world.vision, world.bob, clock, _at(31, 22, month=10), _at(1, 2))
    running = submit_job(
        world.nlp, parse_spec(spec(team="nlp", gpus_per_node=2)), acting_user=world.carol
    )
    clock.set(_at(29, 20))
    start(running, clock, running_after=0)
    clock.set(_at(30, 12, minute=30))
    return world


def _shown(rows: dict[tuple[str, ...], Any], totals: dict[str, Any]) -> tuple[Any, Any]:
    return (
        {key: figures.as_dict() for key, figures in rows.items()},
        {team: figures.as_dict() for team, figures in totals.items()},
    )


def _both_ways(period: Period, group_by: tuple[str, ...], now: datetime) -> tuple[Any, Any]:
    segments, book = UsageSegment.unscoped.all(), PriceBook.load()
    summed = fold(segments, period, group_by, book, now)
    rolled_up = fold(segments, period, group_by, book, now, UsageDay.unscoped.all())
    return _shown(*summed), _shown(*rolled_up)


@pytest.mark.parametrize("group_by", GROUPINGS)
@pytest.mark.parametrize("period", PERIODS, ids=lambda p: f"{p.start}..{p.end}")
def test_the_roll_up_gives_the_report_that_summing_the_segments_gives(
    lifecycles: World, clock: FakeClock, period: Period, group_by: tuple[str, ...]
) -> None:
    summed, rolled_up = _both_ways(period, group_by, clock.now)
    assert rolled_up == summed
    assert summed[1]  # not an empty report equal to another


def test_the_roll_up_holds_exactly_the_closed_segments_gpu_time(lifecycles: World) -> None:
    closed = UsageSegment.unscoped.filter(ended_at__isnull=False)
    seconds = closed.aggregate(total=Sum("gpu_seconds"))["total"]
    microseconds = UsageDay.unscoped.aggregate(total=Sum("gpu_microseconds"))["total"]
    assert Decimal(microseconds) == seconds * 1_000_000
    # Split at midnight: bob's 2 GPUs from 15 Nov 12:07 hold 11 h 53 min of the 15th.
    fifteenth = UsageDay.unscoped.get(day=date(2026, 11, 15))
    assert fifteenth.gpu_microseconds == 2 * (11 * 3600 + 53 * 60) * 1_000_000


def test_a_run_closing_moves_its_time_from_live_to_the_roll_up_unchanged(
    lifecycles: World, clock: FakeClock
) -> None:
    november, admin = month_period("2026-11"), lifecycles.admin
    before = usage_report(admin, november, ("team", "user"), now=clock.now).as_rows()
    [running] = UsageSegment.unscoped.filter(ended_at__isnull=True).select_related("job")
    transition(running.job, State.SUCCEEDED, "completed")
    after = usage_report(admin, november, ("team", "user"), now=clock.now).as_rows()
    assert after == before
    carol = [row for row in after if row["user"] == "carol"]
    # 2 GPUs × 16 h 30 min still running, and 61 min; the preempted 3 h are credited.
    assert (carol[0]["gpu_seconds"], carol[0]["credited_gpu_seconds"]) == (
        "122460.000",
        "10800.000",
    )


def test_a_run_admitted_and_released_in_one_flush_is_rolled_up(
    world: World, clock: FakeClock
) -> None:
    job = submit_job(world.vision, parse_spec(spec(team="vision")), acting_user=world.bob)
    moves = Moves()
    admit(job, {"node-1": job.total_gpus}, moves)
    clock.advance(90)
    transition(job, State.FAILED, "Xid 79: GPU fell off the bus", moves=moves)
    moves.flush()
    [day] = UsageDay.unscoped.all()
    assert (day.credited, day.gpu_microseconds) == (True, 90 * 1_000_000)


def test_a_members_report_from_the_roll_up_shows_their_own_runs_only(
    lifecycles: World, clock: FakeClock
) -> None:
    bob, november = lifecycles.bob, month_period("2026-11")
    report = usage_report(bob, november, ("user", "queue"), now=clock.now)
    book = PriceBook.load()
    summed = fold(visible_segments(bob), november, ("user", "queue"), book, clock.now)[0]
    assert {key: f.as_dict() for key, f in report.rows.items()} == {
        key: f.as_dict() for key, f in summed.items()
    }
    assert {key[0] for key in report.rows} == {"bob"}
    assert set(report.team_totals) == {"vision"}


def test_the_migration_rolls_up_the_segments_closed_before_it(lifecycles: World) -> None:
    fields = ("day", "team", "user", "queue", "gpu_type", "credited", "gpu_microseconds")
    kept = sorted(UsageDay.unscoped.values_list(*fields))
    UsageDay.unscoped.all().delete()
    migration = importlib.import_module("billing.migrations.0004_usage_day")
    migration.add_closed_segments(apps, None)
    assert sorted(UsageDay.unscoped.values_list(*fields)) == kept
