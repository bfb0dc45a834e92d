"""Usage over a period, grouped as asked, with its cost: what the API and the page show.

Who sees what: an admin every team; a team's lead (or its department's) the whole team; a
member their own jobs, and the team's totals only.

A report not by job or day reads the closed segments' GPU time from their daily roll-up
(`UsageDay`: a month of a busy cluster is a fraction of its segments' rows) and sums the open
segments live, both in one snapshot of the database.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, Greatest, Least
from django.utils import timezone

from billing.models import UsageDay, UsageSegment
from billing.prices import PriceBook, cost, day_start
from billing.rollup import days_between, one_snapshot
from billing.segments import MICROSECONDS, seconds_between
from quotas.models import GpuType, Queue
from tenants.models import Membership, Role, Team

if TYPE_CHECKING:
    from tenants.scoping import AnyUser

GROUPS = {
    "job": "job_id",
    "team": "team__slug",
    "user": "user__username",
    "gpu_type": "gpu_type__name",
    "queue": "queue__name",
}
"""What usage may be grouped by (besides "day"): the label each group shows."""
GROUP_NAMES = (*GROUPS, "day")
ROLLED_UP = {"team", "user", "gpu_type", "queue"}
"""The groups the daily roll-up keeps: a report by these alone may read it."""
ZERO = Decimal(0)
Scoped = TypeVar("Scoped", UsageSegment, UsageDay)


@dataclass(frozen=True)
class Period:
    """[start, end), whole UTC days."""

    start: date
    end: date

    @property
    def begins(self) -> datetime:
        return day_start(self.start)

    @property
    def ends(self) -> datetime:
        return day_start(self.end)


@dataclass
class Figures:
    """GPU-seconds and their cost, billed and credited apart."""

    gpu_seconds: Decimal = ZERO
    cost: Decimal = ZERO
    credited_gpu_seconds: Decimal = ZERO
    credited_cost: Decimal = ZERO

    def add(self, gpu_seconds: Decimal, amount: Decimal, credited: bool) -> None:
        if credited:
            self.credited_gpu_seconds += gpu_seconds
            self.credited_cost += amount
        else:
            self.gpu_seconds += gpu_seconds
            self.cost += amount

    def as_dict(self) -> dict[str, str]:
        return {
            "gpu_seconds": fixed(self.gpu_seconds, 3),
            "gpu_hours": fixed(self.gpu_seconds / 3600, 4),
            "cost": fixed(self.cost, 2),
            "credited_gpu_seconds": fixed(self.credited_gpu_seconds, 3),
            "credited_gpu_hours": fixed(self.credited_gpu_seconds / 3600, 4),
            "credited_cost": fixed(self.credited_cost, 2),
        }


def fixed(value: Decimal, places: int) -> str:
    return str(value.quantize(Decimal(1).scaleb(-places)))


@dataclass
class Report:
    period: Period
    group_by: tuple[str, ...]
    rows: dict[tuple[str, ...], Figures] = field(default_factory=dict)
    team_totals: dict[str, Figures] = field(default_factory=dict)

    def as_rows(self) -> list[dict[str, Any]]:
        return [
            {**dict(zip(self.group_by, key, strict=True)), **figures.as_dict()}
            for key, figures in sorted(self.rows.items())
        ]


def led_team_ids(user: AnyUser) -> set[int]:
    """Teams whose whole usage `user` sees as a lead: those they lead and their sub-teams."""
    if user.pk is None:
        return set()
    led = set(
        Membership.unscoped.filter(user_id=user.pk, role=Role.LEAD).values_list("team", flat=True)
    )
    return led | set(Team.objects.filter(parent_id__in=led).values_list("id", flat=True))


def _visible(rows: QuerySet[Scoped], user: AnyUser) -> QuerySet[Scoped]:
    if user.is_staff:
        return rows
    return rows.filter(Q(team_id__in=led_team_ids(user)) | Q(user_id=user.pk))


def visible_segments(user: AnyUser) -> QuerySet[UsageSegment]:
    """The segments whose details `user` may see."""
    return _visible(UsageSegment.objects.for_user(user), user)


def visible_days(user: AnyUser) -> QuerySet[UsageDay]:
    """The roll-up of the segments whose details `user` may see."""
    return _visible(UsageDay.objects.for_user(user), user)


def _overlapping(segments: QuerySet[UsageSegment], period: Period) -> QuerySet[UsageSegment]:
    return segments.filter(started_at__lt=period.ends).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=period.begins)
    )


VALUES = ("started_at", "ended_at", "gpus", "gpu_type_id", "queue_id", "credited", "team__slug")

Part = tuple[tuple[str, ...], str, Decimal, Decimal, bool]
"""One piece of usage: (its key by the groups, its team, GPU-seconds, cost, credited)."""


def _pieces(
    row: dict[str, Any], period: Period, book: PriceBook, by_day: bool, now: datetime
) -> Iterator[tuple[date, Decimal, Decimal]]:
    """A segment's part in the period: (day, GPU-seconds, cost) per price piece and day."""
    start = max(row["started_at"], period.begins)
    end = min(row["ended_at"] or now, period.ends)
    multiplier = book.multiplier(row["queue_id"])
    for begin, finish, price in book.pieces(row["gpu_type_id"], start, end):
        for day_begin, day_end in days_between(begin, finish) if by_day else [(begin, finish)]:
            gpu_seconds = row["gpus"] * seconds_between(day_begin, day_end)
            if gpu_seconds:
                yield day_begin.date(), gpu_seconds, cost(gpu_seconds, price, multiplier)


def _daily_parts(
    segments: QuerySet[UsageSegment],
    period: Period,
    group_by: Sequence[str],
    book: PriceBook,
    now: datetime,
) -> Iterator[Part]:
    """Segment by segment, split at midnight: a day is no column SQL can group by here."""
    labels = [GROUPS[name] for name in group_by if name != "day"]
    for row in _overlapping(segments, period).values(*VALUES, *labels):
        for day, gpu_seconds, amount in _pieces(row, period, book, True, now):
            key = tuple(
                day.isoformat() if name == "day" else str(row[GROUPS[name]]) for name in group_by
            )
            yield key, row["team__slug"], gpu_seconds, amount, row["credited"]


def _windows(period: Period, book: PriceBook) -> list[tuple[datetime, datetime]]:
    """The period split where any GPU type's price changes: one price per type in each."""
    changes = book.all_changes_between(period.begins, period.ends)
    return list(pairwise([period.begins, *changes, period.ends]))


def _labels(name: str, ids: Iterable[int]) -> dict[int, str]:
    """What each id of a group shows (a job: its id)."""
    ids = set(ids)
    if name == "job":
        return {pk: str(pk) for pk in ids}
    found: QuerySet[Any] = {
        "team": Team.objects,
        "user": get_user_model().objects,
        "gpu_type": GpuType.objects,
        "queue": Queue.unscoped,
    }[name].filter(pk__in=ids)
    return {pk: str(label) for pk, label in found.values_list("pk", GROUPS[name].split("__")[1])}


def _window_sums(
    segments: QuerySet[UsageSegment], keys: list[str], begin: datetime, end: datetime, now: datetime
) -> Iterator[tuple[dict[str, Any], Decimal]]:
    """Each group's GPU-seconds in [begin, end): its segments cut at the bounds (an open one
    at now), their lengths summed by the database, times their GPUs."""
    ends_after = Q(ended_at__gt=begin)
    if now > begin:  # an open segment holds its GPUs until now
        ends_after |= Q(ended_at__isnull=True, started_at__lt=now)
    overlapping = segments.filter(ends_after, started_at__lt=end)
    held = Least(Coalesce("ended_at", Value(now)), Value(end)) - Greatest(
        "started_at", Value(begin)
    )
    for row in overlapping.order_by().values(*keys, "gpus").annotate(held=Sum(held)):
        yield row, row["gpus"] * seconds_between(begin, begin + row["held"])


def _day_sums(
    days: QuerySet[UsageDay], keys: list[str], begin: datetime, end: datetime
) -> Iterator[tuple[dict[str, Any], Decimal]]:
    """Each group's GPU-seconds of closed segments in [begin, end), whole days (a price window
    begins and ends at midnight), from the roll-up."""
    in_window = days.filter(day__gte=begin.date(), day__lt=end.date()).order_by()
    for row in in_window.values(*keys).annotate(held=Sum("gpu_microseconds")):
        yield row, Decimal(row["held"]) / MICROSECONDS


def _summed_parts(
    segments: QuerySet[UsageSegment],
    period: Period,
    group_by: Sequence[str],
    book: PriceBook,
    now: datetime,
    days: QuerySet[UsageDay] | None,
) -> Iterator[Part]:
    """Summed by the database, per price window, by ids (labels are looked up after): the
    GPU-seconds of each group with what prices them (GPU type, queue), each priced once. A
    month of a busy cluster is too many segments to add up one by one in Python for each page
    and statement. With `days` (the roll-up of `segments`), only the open segments are read."""
    ids = [f"{name}_id" for name in group_by]
    keys = list(dict.fromkeys([*ids, "team_id", "gpu_type_id", "queue_id", "credited"]))
    if days is not None:
        segments = segments.filter(ended_at__isnull=True)
    held: dict[tuple[datetime, tuple[Any, ...]], Decimal] = defaultdict(Decimal)
    with one_snapshot():
        for begin, end in _windows(period, book):
            for row, gpu_seconds in _window_sums(segments, keys, begin, end, now):
                held[begin, tuple(row[k] for k in keys)] += gpu_seconds
            for row, gpu_seconds in _day_sums(days, keys, begin, end) if days is not None else ():
                held[begin, tuple(row[k] for k in keys)] += gpu_seconds
    sums = [(begin, dict(zip(keys, key, strict=True)), s) for (begin, key), s in held.items() if s]
    labels = {
        name: _labels(name, (row[f"{name}_id"] for _, row, _ in sums))
        for name in {*group_by, "team"}
    }
    for begin, row, gpu_seconds in sorted(sums, key=lambda part: (part[0], *part[1].values())):
        price = book.price_at(row["gpu_type_id"], begin)
        amount = cost(gpu_seconds, price, book.multiplier(row["queue_id"]))
        key = tuple(labels[name][row[f"{name}_id"]] for name in group_by)
        yield key, labels["team"][row["team_id"]], gpu_seconds, amount, row["credited"]


Rows = dict[tuple[str, ...], Figures]


def fold(
    segments: QuerySet[UsageSegment],
    period: Period,
    group_by: Sequence[str],
    book: PriceBook,
    now: datetime,
    days: QuerySet[UsageDay] | None = None,
) -> tuple[Rows, dict[str, Figures]]:
    """The segments' usage in `period`: by the groups (names in GROUP_NAMES), and by team.
    `days`, the roll-up of the same segments (the same scope), is read instead of the closed
    ones where the groups allow it."""
    rows: Rows = {}
    teams: dict[str, Figures] = {}
    if "day" in group_by:
        parts = _daily_parts(segments, period, group_by, book, now)
    else:
        rolled_up = days if days is not None and ROLLED_UP.issuperset(group_by) else None
        parts = _summed_parts(segments, period, group_by, book, now, rolled_up)
    for key, team, gpu_seconds, amount, credited in parts:
        rows.setdefault(key, Figures()).add(gpu_seconds, amount, credited)
        teams.setdefault(team, Figures()).add(gpu_seconds, amount, credited)
    return rows, dict(sorted(teams.items()))


def usage_report(
    user: AnyUser,
    period: Period,
    group_by: Sequence[str],
    *,
    team: Team | None = None,
    now: datetime | None = None,
) -> Report:
    """`user`'s view of the usage in `period`, grouped by `group_by` (names in GROUP_NAMES),
    of `team` alone when given (one the caller has checked `user` may see)."""
    now = now or timezone.now()
    book = PriceBook.load()
    details, details_days = visible_segments(user), visible_days(user)
    totals, totals_days = UsageSegment.objects.for_user(user), UsageDay.objects.for_user(user)
    if team is not None:
        details, totals = details.filter(team=team), totals.filter(team=team)
        details_days, totals_days = details_days.filter(team=team), totals_days.filter(team=team)
    rows, team_totals = fold(details, period, group_by, book, now, details_days)
    if not user.is_staff:  # an admin's details are every segment: their totals are those
        team_totals = fold(totals, period, (), book, now, totals_days)[1]
    return Report(period, tuple(group_by), rows, team_totals)


def month_period(month: str) -> Period:
    """ "YYYY-MM" as a period; ValueError when it is not one."""
    first = datetime.strptime(month, "%Y-%m").date()
    following = (first.replace(day=28) + timedelta(days=4)).replace(day=1)
    return Period(first, following)


def current_month(now: datetime | None = None) -> Period:
    return month_period((now or timezone.now()).strftime("%Y-%m"))


def group_totals(rows: Rows) -> Figures:
    total = Figures()
    for figures in rows.values():
        total.gpu_seconds += figures.gpu_seconds
        total.cost += figures.cost
        total.credited_gpu_seconds += figures.credited_gpu_seconds
        total.credited_cost += figures.credited_cost
    return total
