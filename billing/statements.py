"""Monthly statements per team and per department: the live draft of a month not yet over
(or not yet finalised), and the final statement written once at its end and never changed after.

A department (a team with sub-teams) is billed for itself and its sub-teams: its statement is
the sum of theirs to the cent (each part rounded as its own statement is), a line per part, and
its due takes in the adjustments of its parts. It is stored as the department team's own
`Statement` row, written with its sub-teams' at the month's end, so it stays as it was even if a
team later moves to another department.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from billing.models import Adjustment, Statement, UsageSegment
from billing.prices import PriceBook, currency
from billing.usage import Figures, Period, Rows, current_month, fold, led_team_ids, month_period
from tenants.access import access_team
from tenants.models import Team

if TYPE_CHECKING:
    from tenants.scoping import AnyUser

LINE_GROUPS = ("user", "gpu_type", "queue")
"""What a team's statement's lines are by."""
DEPARTMENT_GROUPS = ("team",)
"""What a department's statement's lines are by: its parts, itself and each sub-team."""


@dataclass
class TeamStatement:
    """A team's (or department's) statement of a month as shown: final (stored) or a draft."""

    team: Team
    month: date
    final: bool
    currency: str
    figures: Figures
    lines: list[dict[str, Any]]
    adjustments: list[Adjustment] = field(default_factory=list)
    groups: tuple[str, ...] = LINE_GROUPS

    @property
    def due(self) -> Decimal:
        return self.figures.cost + sum((a.amount for a in self.adjustments), Decimal(0))

    @property
    def department(self) -> bool:
        return self.groups == DEPARTMENT_GROUPS


def previous_month(period: Period) -> Period:
    return month_period((period.start - timedelta(days=1)).strftime("%Y-%m"))


def _lines(rows: Rows, team_slug: str) -> list[dict[str, Any]]:
    return [
        {**dict(zip(LINE_GROUPS, key[1:], strict=True)), **figures.as_dict()}
        for key, figures in sorted(rows.items())
        if key[0] == team_slug
    ]


def _stored_figures(statement: Statement) -> Figures:
    return Figures(
        statement.gpu_seconds,
        statement.cost,
        statement.credited_gpu_seconds,
        statement.credited_cost,
    )


def _rounded(figures: Figures) -> Figures:
    """The figures as a final statement stores them: money to the cent."""
    return Figures(
        figures.gpu_seconds,
        round(figures.cost, 2),
        figures.credited_gpu_seconds,
        round(figures.credited_cost, 2),
    )


def _stored(statement: Statement, team: Team) -> TeamStatement:
    # A final statement says what it is by its lines: a department's are by part.
    groups = DEPARTMENT_GROUPS if any("team" in line for line in statement.lines) else LINE_GROUPS
    return TeamStatement(
        team,
        statement.month,
        True,
        statement.currency,
        _stored_figures(statement),
        statement.lines,
        list(statement.adjustments.all()),
        groups,
    )


def _own_statements(
    teams: Iterable[Team], period: Period, now: datetime
) -> dict[int, TeamStatement]:
    """Each team's final statement, or a draft of its own usage worked out now, by team id."""
    teams = list(teams)
    final = {
        s.team_id: s
        for s in Statement.unscoped.filter(team__in=teams, month=period.start).prefetch_related(
            "adjustments__actor", "adjustments__team"
        )
    }
    drafts = [team for team in teams if team.pk not in final]
    rows: Rows = {}
    totals: dict[str, Figures] = {}
    if drafts:
        segments = UsageSegment.unscoped.filter(team__in=drafts)
        rows, totals = fold(segments, period, ("team", *LINE_GROUPS), PriceBook.load(), now)
    return {
        team.pk: _stored(final[team.pk], team)
        if team.pk in final
        else TeamStatement(
            team,
            period.start,
            False,
            currency(),
            totals.get(team.slug, Figures()),
            _lines(rows, team.slug),
        )
        for team in teams
    }


def _used(figures: Figures) -> bool:
    return bool(figures.gpu_seconds or figures.credited_gpu_seconds)


def _department_draft(own: TeamStatement, parts: list[TeamStatement]) -> TeamStatement:
    """A department's statement from its parts': itself (where it used GPUs) and its teams."""
    parts = ([own] if _used(own.figures) else []) + parts
    total = Figures()
    lines = []
    for part in parts:
        figures = _rounded(part.figures)
        total.gpu_seconds += figures.gpu_seconds
        total.cost += figures.cost
        total.credited_gpu_seconds += figures.credited_gpu_seconds
        total.credited_cost += figures.credited_cost
        lines.append({"team": part.team.slug, **figures.as_dict()})
    adjustments = sorted(
        (a for part in parts for a in part.adjustments), key=lambda a: (a.created_at, a.pk)
    )
    return TeamStatement(
        own.team, own.month, False, own.currency, total, lines, adjustments, DEPARTMENT_GROUPS
    )


def _with_part_adjustments(statement: TeamStatement) -> TeamStatement:
    """A final department's own adjustments and those of the parts it was finalised with."""
    parts = [line["team"] for line in statement.lines if line["team"] != statement.team.slug]
    of_parts = Adjustment.unscoped.filter(
        statement__team__slug__in=parts, statement__month=statement.month
    ).select_related("actor", "team")
    statement.adjustments = sorted(
        [*statement.adjustments, *of_parts], key=lambda a: (a.created_at, a.pk)
    )
    return statement


def team_statements(
    teams: Iterable[Team], period: Period, now: datetime | None = None
) -> list[TeamStatement]:
    """The month's statement of each team (a department's for a team with sub-teams): its
    final one, or a draft worked out now."""
    now = now or timezone.now()
    teams = sorted(teams, key=lambda t: t.slug)
    subteams: dict[int, list[Team]] = {}
    for sub in Team.objects.filter(parent__in=teams).order_by("slug"):
        subteams.setdefault(sub.parent_id or 0, []).append(sub)
    parts = {sub.pk: sub for subs in subteams.values() for sub in subs}
    own = _own_statements({**parts, **{t.pk: t for t in teams}}.values(), period, now)
    shown = []
    for team in teams:
        statement = own[team.pk]
        if statement.final and statement.department:
            statement = _with_part_adjustments(statement)
        elif not statement.final and team.pk in subteams:
            statement = _department_draft(statement, [own[s.pk] for s in subteams[team.pk]])
        shown.append(statement)
    return shown


def finalise_month(period: Period, now: datetime | None = None) -> int:
    """Write the final statement of every team that used GPUs in `period` and has none yet
    (a month that is over), then of every department whose parts did; returns how many it
    wrote. Running it again writes none."""
    now = now or timezone.now()
    if period.ends > now:
        raise ValueError(f"{period.start:%Y-%m} is not over")
    done = Statement.unscoped.filter(month=period.start).values("team_id")
    departments = Team.objects.filter(children__isnull=False).distinct()
    segments = UsageSegment.unscoped.exclude(team_id__in=done).exclude(team__in=departments)
    rows, totals = fold(segments, period, ("team", *LINE_GROUPS), PriceBook.load(), now)
    teams = dict(Team.objects.filter(slug__in=totals).values_list("slug", "id"))
    statements = [
        _final(teams[slug], period, _rounded(figures), _lines(rows, slug), now)
        for slug, figures in totals.items()
    ]
    with transaction.atomic():
        # Another worker finalising the same month at once: the constraint keeps its statements.
        written = len(Statement.unscoped.bulk_create(statements, ignore_conflicts=True))
        drafts = team_statements(departments.exclude(id__in=done), period, now)
        rollups = [
            _final(d.team.pk, period, d.figures, d.lines, now) for d in drafts if _used(d.figures)
        ]
        written += len(Statement.unscoped.bulk_create(rollups, ignore_conflicts=True))
    return written


def _final(
    team_id: int, period: Period, figures: Figures, lines: list[dict[str, Any]], now: datetime
) -> Statement:
    return Statement(
        team_id=team_id,
        month=period.start,
        currency=currency(),
        gpu_seconds=figures.gpu_seconds,
        cost=figures.cost,
        credited_gpu_seconds=figures.credited_gpu_seconds,
        credited_cost=figures.credited_cost,
        lines=lines,
        finalised_at=now,
    )


def finalise_last_month(now: datetime | None = None) -> int:
    """The month before the current one (the periodic task's work)."""
    now = now or timezone.now()
    return finalise_month(previous_month(current_month(now)), now)


def final_months_from(day: date) -> list[str]:
    """The final months ("YYYY-MM") that a change effective from `day` would alter."""
    months = Statement.unscoped.filter(month__gte=day.replace(day=1)).values_list(
        "month", flat=True
    )
    return sorted({month.strftime("%Y-%m") for month in months})


def statement_teams(user: AnyUser, slug: str | None) -> list[Team]:
    """The teams whose statements `user` reads: all for an admin, those they lead (and their
    sub-teams) for a lead, none for a member; one of them when `slug` names it."""
    teams = Team.objects.all() if user.is_staff else Team.objects.filter(id__in=led_team_ids(user))
    if slug is not None:
        team = access_team(user, slug)
        return [team] if teams.filter(pk=team.pk).exists() else []
    return list(teams)
