"""Quota rules: guaranteed within limit, and a sub-team's quota inside its department's.

A department's quota is split among its sub-teams: each sub-team's limit fits under the
department's limit, and their guarantees together fit in the department's guarantee. A
queue's priority stays in the range the platform sets.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Max, Sum
from django.utils.translation import gettext as _

from quotas.models import GpuType, Quota
from tenants.models import Team


def check_quota(team: Team, gpu_type: GpuType, guaranteed: int, limit: int) -> None:
    """Raise ValidationError naming the field and the limit it crosses."""
    if guaranteed > limit:
        raise ValidationError({"guaranteed": f"{guaranteed} is above the limit of {limit}"})
    if team.parent_id is not None:
        _check_fits_parent(team, gpu_type, guaranteed, limit)
    _check_holds_children(team, gpu_type, guaranteed, limit)


def _check_fits_parent(team: Team, gpu_type: GpuType, guaranteed: int, limit: int) -> None:
    parent = team.parent
    assert parent is not None
    parent_quota = Quota.objects.for_team(parent).filter(gpu_type=gpu_type).first()
    if parent_quota is None:
        raise ValidationError(
            {"gpu_type": f"department {parent.slug} has no {gpu_type.name} quota to split"}
        )
    if limit > parent_quota.limit:
        raise ValidationError(
            {
                "limit": f"{limit} is above department {parent.slug}'s limit of "
                f"{parent_quota.limit} {gpu_type.name}"
            }
        )
    siblings = (
        Quota.unscoped.filter(team__parent=parent, gpu_type=gpu_type)
        .exclude(team=team)
        .aggregate(total=Sum("guaranteed"))["total"]
        or 0
    )
    if siblings + guaranteed > parent_quota.guaranteed:
        raise ValidationError(
            {
                "guaranteed": f"sub-teams of {parent.slug} would hold {siblings + guaranteed} "
                f"guaranteed {gpu_type.name}, the department has {parent_quota.guaranteed}"
            }
        )


def _check_holds_children(team: Team, gpu_type: GpuType, guaranteed: int, limit: int) -> None:
    children = Quota.unscoped.filter(team__parent=team, gpu_type=gpu_type).aggregate(
        total=Sum("guaranteed"), widest=Max("limit")
    )
    if children["total"] and children["total"] > guaranteed:
        raise ValidationError(
            {
                "guaranteed": f"{guaranteed} is below the {children['total']} {gpu_type.name} "
                "already guaranteed to sub-teams"
            }
        )
    if children["widest"] and children["widest"] > limit:
        raise ValidationError(
            {
                "limit": f"{limit} is below a sub-team's limit of {children['widest']} "
                f"{gpu_type.name}"
            }
        )


def check_queue_priority(priority: int) -> None:
    """A queue's priority becomes a cluster-wide PriorityClass: keep it in the admins' range
    (QUEUE_PRIORITY_MIN..MAX), well inside what Kubernetes allows."""
    low, high = settings.QUEUE_PRIORITY_MIN, settings.QUEUE_PRIORITY_MAX
    if not low <= priority <= high:
        raise ValidationError(
            {
                "priority": _("%(priority)s is outside the queue priorities %(low)s to %(high)s")
                % {"priority": priority, "low": low, "high": high}
            }
        )
