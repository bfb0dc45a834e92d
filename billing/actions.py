"""Changes to the price book and the budgets: each in one transaction with its audit event."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils.translation import gettext as _

from audit.record import record
from base.errors import FieldErrors
from billing.budgets import forget_holds
from billing.models import Adjustment, Budget, GpuPrice, QueueMultiplier, Statement
from billing.statements import final_months_from
from quotas.models import GpuType, Queue
from tenants.access import is_lead

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tenants.models import Team


def staff_only(user: User) -> None:
    """Refuse (403) anyone but a platform admin."""
    if not user.is_staff:
        raise PermissionDenied(_("Only platform admins change prices."))


def set_gpu_price(
    gpu_type: GpuType, effective_from: date, price: Decimal, *, acting_user: User
) -> GpuPrice:
    """Price a GPU-hour of `gpu_type` from `effective_from` on; earlier entries stay (the
    history), an entry of the same day is replaced."""
    staff_only(acting_user)
    if final := final_months_from(effective_from):
        raise FieldErrors(
            {
                "effective_from": _(
                    "the statements of %(months)s are final and never change: price from a "
                    "later day, and correct them with an adjustment"
                )
                % {"months": ", ".join(final)}
            }
        )
    with transaction.atomic():
        entry = (
            GpuPrice.objects.select_for_update()
            .filter(gpu_type=gpu_type, effective_from=effective_from)
            .first()
        )
        before = None if entry is None else {"price_per_gpu_hour": entry.price_per_gpu_hour}
        if entry is None:
            entry = GpuPrice(gpu_type=gpu_type, effective_from=effective_from)
        entry.price_per_gpu_hour = price
        entry.save()
        record(
            "billing.price_set",
            actor=acting_user,
            team=None,
            target=entry,
            before=before,
            after={
                "gpu_type": gpu_type.name,
                "effective_from": effective_from.isoformat(),
                "price_per_gpu_hour": price,
            },
        )
    return entry


def set_queue_multiplier(queue: Queue, multiplier: Decimal, *, acting_user: User) -> None:
    """What `queue`'s GPU-hours cost against the price book (1: as priced)."""
    staff_only(acting_user)
    with transaction.atomic():
        entry = QueueMultiplier.objects.for_team(queue.team).filter(queue=queue).first()
        before = None if entry is None else {"multiplier": entry.multiplier}
        QueueMultiplier.unscoped.update_or_create(
            queue=queue, defaults={"team": queue.team, "multiplier": multiplier}
        )
        record(
            "billing.queue_multiplier_set",
            actor=acting_user,
            team=queue.team,
            target=queue,
            before=before,
            after={"queue": queue.name, "multiplier": multiplier},
        )


MAX_REASON = 255


def adjust_statement(
    statement: Statement, amount: Decimal, reason: str, *, acting_user: User
) -> Adjustment:
    """Correct a final statement: an amount added to what it says, with the reason."""
    staff_only(acting_user)
    reason = reason.strip()
    if not reason:
        raise FieldErrors({"reason": _("is required: say why the statement is corrected")})
    if len(reason) > MAX_REASON:
        raise FieldErrors({"reason": _("at most %(n)s characters") % {"n": MAX_REASON}})
    if not amount:
        raise FieldErrors({"amount": _("must not be zero")})
    with transaction.atomic():
        adjustment = Adjustment.objects.create(
            team=statement.team,
            statement=statement,
            amount=amount,
            reason=reason,
            actor=acting_user,
        )
        record(
            "billing.adjustment",
            actor=acting_user,
            team=statement.team,
            target=statement,
            after={"month": statement.month.isoformat(), "amount": amount, "reason": reason},
        )
    return adjustment


MAX_BUDGET = Decimal("999999999999.99")
BUDGET_FIELDS = ("amount", "warning_pct", "critical_pct", "hard_stop")


def may_set_budget(user: User, team: Team) -> bool:
    """Admins set any team's budget; a department's leads share out its money among its
    sub-teams, as they do its quota. A team's own leads see theirs but do not set it: a
    budget that stops jobs is no limit if those it limits can lift it."""
    return user.is_staff or (team.parent is not None and is_lead(user, team.parent))


def _budget_errors(amount: Decimal, warning_pct: int, critical_pct: int) -> dict[str, str]:
    errors = {}
    if not Decimal("0.01") <= amount <= MAX_BUDGET:
        errors["amount"] = _("must be from 0.01 to %(max)s") % {"max": MAX_BUDGET}
    if not 1 <= warning_pct <= 99:
        errors["warning_pct"] = _("must be a whole percent from 1 to 99")
    elif not warning_pct < critical_pct <= 100:
        errors["critical_pct"] = _("must be above warning_pct (%(warning)s) and at most 100") % {
            "warning": warning_pct
        }
    return errors


def set_budget(
    team: Team,
    *,
    amount: Decimal,
    warning_pct: int = 80,
    critical_pct: int = 100,
    hard_stop: bool = False,
    acting_user: User,
) -> Budget:
    """Give `team` a monthly budget, or change it: the scheduler's hold sees it at its next
    cycle (raised above what was spent, the team's waiting jobs may start)."""
    if not may_set_budget(acting_user, team):
        raise PermissionDenied(_("Only platform admins and the department's leads set budgets."))
    if errors := _budget_errors(amount, warning_pct, critical_pct):
        raise FieldErrors(errors)
    with transaction.atomic():
        budget = Budget.objects.for_team(team).select_for_update().first()
        before = None if budget is None else {f: getattr(budget, f) for f in BUDGET_FIELDS}
        budget = budget or Budget(team=team)
        budget.amount, budget.hard_stop = amount, hard_stop
        budget.warning_pct, budget.critical_pct = warning_pct, critical_pct
        budget.save()
        record(
            "billing.budget_set",
            actor=acting_user,
            team=team,
            target=budget,
            before=before,
            after={f: getattr(budget, f) for f in BUDGET_FIELDS},
        )
        transaction.on_commit(forget_holds)
    return budget


def delete_budget(budget: Budget, *, acting_user: User) -> None:
    """Take a team's budget away: no more thresholds, and no hold on its jobs."""
    if not may_set_budget(acting_user, budget.team):
        raise PermissionDenied(_("Only platform admins and the department's leads set budgets."))
    with transaction.atomic():
        before = {f: getattr(budget, f) for f in BUDGET_FIELDS}
        record(
            "billing.budget_delete",
            actor=acting_user,
            team=budget.team,
            target=budget,
            before=before,
        )
        budget.delete()
        transaction.on_commit(forget_holds)
