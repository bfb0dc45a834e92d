"""Monthly statements per team: the live draft of a month not yet over (or not yet
finalised), and the final statement written once at its end and never changed after."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from billing.models import Adjustment, Statement, UsageSegment
from billing.prices import PriceBook, currency
from billing.usage import Figures, Period, Rows, current_month, fold, led_team_ids, month_period
from tenants.access import access_team
from tenants.models import Team

if TYPE_CHECKING:
    from tenants.scoping import AnyUser

LINE_GROUPS = ("user", "gpu_type", "queue")
"""What a statement's lines are by."""


@dataclass
class TeamStatement:
    """A team's statement of a month as shown: final (stored) or a live draft."""

    team: Team
    month: date
    final: bool
    currency: str
    figures: Figures
    lines: list[dict[str, Any]]
    adjustments: list[Adjustment] = field(default_factory=list)

    @property
    def due(self) -> Decimal:
        return self.figures.cost + sum((a.amount for a in self.adjustments), Decimal(0))


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


def team_statements(
    teams: Iterable[Team], period: Period, now: datetime | None = None
) -> list[TeamStatement]:
    """The month's statement of each team: its final one, or a draft worked out now."""
    now = now or timezone.now()
    teams = sorted(teams, key=lambda t: t.slug)
    final = {
        s.team_id: s
        for s in Statement.unscoped.filter(team__in=teams, month=period.start).prefetch_related(
            "adjustments__actor"
        )
    }
    drafts = [team for team in teams if team.pk not in final]
    rows: Rows = {}
    totals: dict[str, Figures] = {}
    if drafts:
        segments = UsageSegment.unscoped.filter(team__in=drafts)
        rows, totals = fold(segments, period, ("team", *LINE_GROUPS), PriceBook.load(), now)
    shown = []
    for team in teams:
        stored = final.get(team.pk)
        if stored is not None:
            shown.append(
                TeamStatement(
                    team,
                    period.start,
                    True,
                    stored.currency,
                    _stored_figures(stored),
                    stored.lines,
                    list(stored.adjustments.all()),
                )
            )
        else:
            figures = totals.get(team.slug, Figures())
            shown.append(
                TeamStatement(
                    team, period.start, False, currency(), figures, _lines(rows, team.slug)
                )
            )
    return shown


def finalise_month(period: Period, now: datetime | None = None) -> int:
    """Write the final statement of every team that used GPUs in `period` and has none yet
    (a month that is over); returns how many it wrote. Running it again writes none."""
    now = now or timezone.now()
    if period.ends > now:
        raise ValueError(f"{period.start:%Y-%m} is not over")
    done = Statement.unscoped.filter(month=period.start).values("team_id")
    segments = UsageSegment.unscoped.exclude(team_id__in=done)
    rows, totals = fold(segments, period, ("team", *LINE_GROUPS), PriceBook.load(), now)
    teams = dict(Team.objects.filter(slug__in=totals).values_list("slug", "id"))
    statements = [
        Statement(
            team_id=teams[slug],
            month=period.start,
            currency=currency(),
            gpu_seconds=figures.gpu_seconds,
            cost=round(figures.cost, 2),
            credited_gpu_seconds=figures.credited_gpu_seconds,
            credited_cost=round(figures.credited_cost, 2),
            lines=_lines(rows, slug),
            finalised_at=now,
        )
        for slug, figures in totals.items()
    ]
    # Another worker finalising the same month at once: the constraint keeps its statements.
    return len(Statement.unscoped.bulk_create(statements, ignore_conflicts=True))


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
