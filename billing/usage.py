"""Usage over a period, grouped as asked, with its cost: what the API and the page show.

Who sees what: an admin every team; a team's lead (or its department's) the whole team; a
member their own jobs, and the team's totals only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from billing.models import UsageSegment
from billing.prices import PriceBook, cost, day_start
from billing.segments import seconds_between
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
ZERO = Decimal(0)


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
            "gpu_seconds": _fixed(self.gpu_seconds, 3),
            "gpu_hours": _fixed(self.gpu_seconds / 3600, 4),
            "cost": _fixed(self.cost, 2),
            "credited_gpu_seconds": _fixed(self.credited_gpu_seconds, 3),
            "credited_gpu_hours": _fixed(self.credited_gpu_seconds / 3600, 4),
            "credited_cost": _fixed(self.credited_cost, 2),
        }


def _fixed(value: Decimal, places: int) -> str:
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


def visible_segments(user: AnyUser) -> QuerySet[UsageSegment]:
    """The segments whose details `user` may see."""
    segments = UsageSegment.objects.for_user(user)
    if user.is_staff:
        return segments
    return segments.filter(Q(team_id__in=led_team_ids(user)) | Q(user_id=user.pk))


def _overlapping(segments: QuerySet[UsageSegment], period: Period) -> QuerySet[UsageSegment]:
    return segments.filter(started_at__lt=period.ends).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=period.begins)
    )


VALUES = ("started_at", "ended_at", "gpus", "gpu_type_id", "queue_id", "credited", "team__slug")


def _pieces(
    row: dict[str, Any], period: Period, book: PriceBook, by_day: bool, now: datetime
) -> Iterator[tuple[date, Decimal, Decimal]]:
    """A segment's part in the period: (day, GPU-seconds, cost) per price piece and day."""
    start = max(row["started_at"], period.begins)
    end = min(row["ended_at"] or now, period.ends)
    multiplier = book.multiplier(row["queue_id"])
    for begin, finish, price in book.pieces(row["gpu_type_id"], start, end):
        for day_begin, day_end in _days(begin, finish) if by_day else [(begin, finish)]:
            gpu_seconds = row["gpus"] * seconds_between(day_begin, day_end)
            if gpu_seconds:
                yield day_begin.date(), gpu_seconds, cost(gpu_seconds, price, multiplier)


def _days(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    while start < end:
        midnight = day_start(start.date() + timedelta(days=1))
        yield start, min(midnight, end)
        start = midnight


Rows = dict[tuple[str, ...], Figures]


def fold(
    segments: QuerySet[UsageSegment],
    period: Period,
    group_by: Sequence[str],
    book: PriceBook,
    now: datetime,
) -> tuple[Rows, dict[str, Figures]]:
    """The segments' usage in `period`: by the groups (names in GROUP_NAMES), and by team."""
    rows: Rows = {}
    teams: dict[str, Figures] = {}
    labels = [GROUPS[name] for name in group_by if name != "day"]
    by_day = "day" in group_by
    for row in _overlapping(segments, period).values(*VALUES, *labels):
        for day, gpu_seconds, amount in _pieces(row, period, book, by_day, now):
            key = tuple(
                day.isoformat() if name == "day" else str(row[GROUPS[name]]) for name in group_by
            )
            rows.setdefault(key, Figures()).add(gpu_seconds, amount, row["credited"])
            teams.setdefault(row["team__slug"], Figures()).add(gpu_seconds, amount, row["credited"])
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
    details = visible_segments(user)
    totals = UsageSegment.objects.for_user(user)
    if team is not None:
        details, totals = details.filter(team=team), totals.filter(team=team)
    rows, team_totals = fold(details, period, group_by, book, now)
    if not user.is_staff:  # an admin's details are every segment: their totals are those
        team_totals = fold(totals, period, (), book, now)[1]
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
