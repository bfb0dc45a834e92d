"""Changes to the price book: each in one transaction with its audit event."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils.translation import gettext as _

from audit.record import record
from base.errors import FieldErrors
from billing.models import Adjustment, GpuPrice, QueueMultiplier, Statement
from billing.statements import final_months_from
from quotas.models import GpuType, Queue

if TYPE_CHECKING:
    from django.contrib.auth.models import User


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
