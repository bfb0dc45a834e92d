"""Who sees which alerts: admins all; a team's leads their team's (and its sub-teams');
everyone the alerts of their own jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Q, QuerySet

from base.roles import Role
from monitoring.models import Alert
from tenants.models import Membership

if TYPE_CHECKING:
    from tenants.scoping import AnyUser


def visible_alerts(user: AnyUser) -> QuerySet[Alert]:
    alerts = Alert.objects.exclude(state="pending").select_related("rule", "team", "node")
    if not user.is_authenticated:
        return alerts.none()
    if user.is_staff:
        return alerts
    led = Membership.unscoped.filter(user=user, role=Role.LEAD).values("team_id")
    return alerts.filter(Q(team_id__in=led) | Q(team__parent_id__in=led) | Q(job__owner=user))
