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
        message = _("%(guaranteed)d is above the limit of %(limit)d")
        raise ValidationError({"guaranteed": message % {"guaranteed": guaranteed, "limit": limit}})
    if team.parent_id is not None:
        _check_fits_parent(team, gpu_type, guaranteed, limit)
    _check_holds_children(team, gpu_type, guaranteed, limit)


def _check_fits_parent(team: Team, gpu_type: GpuType, guaranteed: int, limit: int) -> None:
    parent = team.parent
    assert parent is not None
    parent_quota = Quota.objects.for_team(parent).filter(gpu_type=gpu_type).first()
    figures: dict[str, object] = {"department": parent.slug, "gpu_type": gpu_type.name}
    if parent_quota is None:
        message = _("department %(department)s has no %(gpu_type)s quota to split")
        raise ValidationError({"gpu_type": message % figures})
    if limit > parent_quota.limit:
        message = _("%(limit)d is above department %(department)s's limit of %(most)d %(gpu_type)s")
        figures.update(limit=limit, most=parent_quota.limit)
        raise ValidationError({"limit": message % figures})
    siblings = (
        Quota.unscoped.filter(team__parent=parent, gpu_type=gpu_type)
        .exclude(team=team)
        .aggregate(total=Sum("guaranteed"))["total"]
        or 0
    )
    if siblings + guaranteed > parent_quota.guaranteed:
        message = _(
            "sub-teams of %(department)s would hold %(total)d guaranteed %(gpu_type)s, "
            "the department has %(guaranteed)d"
        )
        figures.update(total=siblings + guaranteed, guaranteed=parent_quota.guaranteed)
        raise ValidationError({"guaranteed": message % figures})


def _check_holds_children(team: Team, gpu_type: GpuType, guaranteed: int, limit: int) -> None:
    children = Quota.unscoped.filter(team__parent=team, gpu_type=gpu_type).aggregate(
        total=Sum("guaranteed"), widest=Max("limit")
    )
    if children["total"] and children["total"] > guaranteed:
        message = _(
            "%(guaranteed)d is below the %(total)d %(gpu_type)s already guaranteed to sub-teams"
        )
        figures = {"guaranteed": guaranteed, "total": children["total"], "gpu_type": gpu_type.name}
        raise ValidationError({"guaranteed": message % figures})
    if children["widest"] and children["widest"] > limit:
        message = _("%(limit)d is below a sub-team's limit of %(widest)d %(gpu_type)s")
        figures = {"limit": limit, "widest": children["widest"], "gpu_type": gpu_type.name}
        raise ValidationError({"limit": message % figures})


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
