"""The scheduling policy admins choose in the portal: read by the controller every cycle.

The policies are the scheduler's (`scheduler.Policy`); this module only keeps which one an
admin chose, audited, and lays it over the configuration a controller started with, so that a
change reaches the next cycle without a restart.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from audit.record import record
from base.errors import FieldErrors
from cluster.models import SchedulingPolicy
from scheduler import Policy, PolicyConfig

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.utils.functional import Promise

ROW = 1
DESCRIPTIONS: dict[Policy, Promise] = {
    Policy.FIFO: gettext_lazy(
        "First come, first served within each queue's priority: the oldest waiting job goes first."
    ),
    Policy.FAIR: gettext_lazy(
        "Fair share: the team with the lowest share of the cluster (its running jobs plus its "
        "decayed past usage, weighed by its guaranteed GPUs) goes first."
    ),
    Policy.CAPACITY: gettext_lazy(
        "Capacity: jobs within their team's guaranteed quota go before jobs that borrow idle GPUs."
    ),
}


def chosen() -> SchedulingPolicy | None:
    """The admin's choice, or None where no admin has chosen (the controller's own holds)."""
    return SchedulingPolicy.objects.filter(pk=ROW).first()


def effective(config: PolicyConfig) -> PolicyConfig:
    """`config` with the admin's policy, where one was chosen: one primary-key read."""
    name = SchedulingPolicy.objects.filter(pk=ROW).values_list("policy", flat=True).first()
    if name is None or name == config.policy:
        return config
    return replace(config, policy=Policy(name))


def set_policy(name: str, *, acting_user: User) -> SchedulingPolicy:
    """Choose the cluster's policy (platform admins); audited with the one it replaces."""
    if not acting_user.is_staff:
        raise FieldErrors({"policy": _("only platform admins choose the scheduling policy")})
    try:
        policy = Policy(name)
    except ValueError:
        allowed = ", ".join(p.value for p in Policy)
        raise FieldErrors(
            {"policy": _("must be one of %(allowed)s") % {"allowed": allowed}}
        ) from None
    with transaction.atomic():
        row = SchedulingPolicy.objects.select_for_update().filter(pk=ROW).first()
        before = row.policy if row else None
        row = row or SchedulingPolicy(pk=ROW)
        row.policy, row.changed_at = policy.value, timezone.now()
        row.changed_by = acting_user.get_username()
        row.save()
        record(
            "scheduler.policy",
            actor=acting_user,
            team=None,
            target=row,
            before={"policy": before},
            after={"policy": policy.value},
        )
    return row
