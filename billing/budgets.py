"""Team budgets: what each team has spent of its month's budget, the notifications to its
leads at the thresholds, and the hold on a team whose budget is spent and stops new jobs.

Spent is the month's billed cost so far, at the price book's prices (credited time is not
billed), worked out as the statements' live draft is (`billing.usage.fold`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.models import Budget, BudgetAlert, BudgetLevel, UsageSegment
from billing.prices import PriceBook, currency
from billing.usage import current_month, fold
from notifications.send import notify
from tenants.models import Role, Team

if TYPE_CHECKING:
    from django.contrib.auth.models import User

LEVELS = ((BudgetLevel.WARNING, "warning_pct"), (BudgetLevel.CRITICAL, "critical_pct"))
"""Each threshold and the budget's field that sets it, lowest first."""
HOLDS_EVERY_S = 30.0
"""Spent figures behind the hold are worked out afresh at most this often (and whenever a
budget changes: its action forgets them)."""
HOLDS_KEY = "billing:budget-holds"


@dataclass(frozen=True)
class BudgetStatus:
    """A team's budget with what it has spent of it this month."""

    budget: Budget
    spent: Decimal

    @property
    def percent(self) -> int:
        """Whole percent of the budget spent (rounded down: 99.99 % is not yet 100 %)."""
        return int((self.spent * 100 / self.budget.amount).to_integral_value(ROUND_FLOOR))

    @property
    def currency(self) -> str:
        return currency()

    @property
    def bar_percent(self) -> int:
        """How full a page's bar is drawn (an overspent budget's is full)."""
        return min(self.percent, 100)

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.budget.amount

    @property
    def held(self) -> bool:
        """Do the team's new jobs wait (once `HOLDS_EVERY_S` has caught up)?"""
        return self.budget.hard_stop and self.exhausted

    def passed(self) -> list[str]:
        """The thresholds spending has reached, lowest first."""
        return [
            level
            for level, field in LEVELS
            if self.spent * 100 >= self.budget.amount * getattr(self.budget, field)
        ]

    def figures(self) -> dict[str, str]:
        """What a held job's reason shows (`ReasonCode.BUDGET_EXHAUSTED`)."""
        return {
            "spent": f"{self.spent:.2f}",
            "budget": f"{self.budget.amount:.2f}",
            "currency": self.currency,
        }


def spent_by_team(teams: Iterable[Team], now: datetime) -> dict[int, Decimal]:
    """Each team's billed cost in the month of `now`, up to `now` (teams that spent nothing
    are left out)."""
    slugs = {team.slug: team.pk for team in teams}
    if not slugs:
        return {}
    segments = UsageSegment.unscoped.filter(team_id__in=slugs.values())
    _rows, totals = fold(segments, current_month(now), (), PriceBook.load(), now)
    return {slugs[slug]: figures.cost for slug, figures in totals.items()}


def budget_statuses(budgets: Iterable[Budget], now: datetime | None = None) -> list[BudgetStatus]:
    """Each budget (with its team loaded) with its spending this month."""
    now = now or timezone.now()
    budgets = list(budgets)
    spent = spent_by_team((b.team for b in budgets), now)
    return [BudgetStatus(b, spent.get(b.team_id, Decimal(0))) for b in budgets]


def team_budget(team: Team, now: datetime | None = None) -> BudgetStatus | None:
    """`team`'s budget with its spending this month; None for a team without a budget."""
    budget = Budget.objects.for_team(team).select_related("team").first()
    return None if budget is None else budget_statuses([budget], now)[0]


# -- thresholds -------------------------------------------------------------------------------


def evaluate_budgets(now: datetime | None = None) -> int:
    """The controller's duty: tell each team's leads the first time in a month its spending
    reaches a threshold of its budget; returns how many teams were told this time.

    What was sent is stored (`BudgetAlert`), so a restarted controller or another leader does
    not send it again; a new month starts afresh. A team that jumps past both thresholds at
    once is told the higher only (the warning would say less, a moment late)."""
    now = now or timezone.now()
    month = current_month(now).start
    sent = set(BudgetAlert.unscoped.filter(month=month).values_list("team_id", "level"))
    told = 0
    for status in budget_statuses(Budget.unscoped.select_related("team"), now):
        new = [level for level in status.passed() if (status.budget.team_id, level) not in sent]
        if new:
            _alert(status, new, month, now)
            told += 1
    return told


def _alert(status: BudgetStatus, levels: list[str], month: date, now: datetime) -> None:
    budget, team = status.budget, status.budget.team
    with transaction.atomic():
        for level in levels:
            BudgetAlert.objects.create(
                team=team,
                month=month,
                level=level,
                spent=round(status.spent, 2),
                budget=budget.amount,
                sent_at=now,
            )
        level = levels[-1]
        notify(
            _leads(team),
            level=level,
            title=_alert_title(status, now),
            body=_alert_body(status),
            link=f"{reverse('usage')}?team={team.slug}",
            dedupe_key=f"budget:{team.pk}:{now:%Y-%m}:{level}",
            team=team,
        )


def _leads(team: Team) -> list[User]:
    users = get_user_model().objects.filter(
        memberships__team=team, memberships__role=Role.LEAD, is_active=True
    )
    return list(users)


def _alert_title(status: BudgetStatus, now: datetime) -> str:
    return _("Team %(team)s has spent %(percent)s%% of its budget for %(month)s") % {
        "team": status.budget.team.slug,
        "percent": status.percent,
        "month": f"{now:%Y-%m}",
    }


def _alert_body(status: BudgetStatus) -> str:
    body = _("%(spent)s of %(budget)s %(currency)s spent.") % status.figures()
    if status.budget.hard_stop:
        body += " " + _(
            "Once the budget is spent, the team's new jobs wait until it is raised or the "
            "month ends; running jobs go on."
        )
    return body


# -- the hold ---------------------------------------------------------------------------------


def budget_holds(now: datetime) -> dict[str, dict[str, str]]:
    """The scheduler's hold (`cluster.snapshot.add_hold`): team slug -> figures of each team
    whose budget is spent and stops new jobs.

    It runs every scheduling cycle, many times a second when jobs come and go, and working out
    the month's spending folds every segment of the month. So the answer is kept in the cache
    (shared by the processes) and worked out afresh only when it is `HOLDS_EVERY_S` old on the
    cycle's clock, in a new month, or when a budget changed (`forget_holds`): a team that
    reaches its budget waits for new jobs up to that much later, a small overrun next to the
    jobs it has running, which go on anyway."""
    month = f"{now:%Y-%m}"
    cached = cache.get(HOLDS_KEY)
    if cached is not None:
        read_at, read_month, holds = cached
        if read_month == month and timedelta(0) <= now - read_at < timedelta(seconds=HOLDS_EVERY_S):
            return dict(holds)
    stops = Budget.unscoped.filter(hard_stop=True).select_related("team")
    holds = {s.budget.team.slug: s.figures() for s in budget_statuses(stops, now) if s.held}
    cache.set(HOLDS_KEY, (now, month, holds), HOLDS_EVERY_S)
    return holds


def forget_holds() -> None:
    """A budget changed: the next cycle works the holds out afresh."""
    cache.delete(HOLDS_KEY)
