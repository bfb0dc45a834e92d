"""`/api/v1/alerts/`: the alerts a caller may see (admins all, a team's leads their team's,
everyone their own jobs'), filtered by state and level; admins acknowledge a firing one.
`urls` is what portal/urls.py includes."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, permissions, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from base.auth import signed_in
from monitoring.alerts.access import visible_alerts
from monitoring.alerts.actions import acknowledge
from monitoring.models import LIVE_ALERT_STATES, Alert, AlertState, Level

STATES = ("live", AlertState.FIRING, AlertState.ACKNOWLEDGED, AlertState.RESOLVED, "all")
"""`?state=`: "live" (the default: firing or acknowledged) or one state, or all of them."""


class AlertSerializer(serializers.ModelSerializer[Alert]):
    rule = serializers.CharField(source="rule.name")
    metric = serializers.CharField(source="rule.metric")
    team = serializers.CharField(source="team.slug", default=None)
    node = serializers.CharField(source="node.name", default=None)
    acknowledged_by = serializers.CharField(source="acknowledged_by.username", default=None)

    class Meta:
        model = Alert
        fields = ["id", "rule", "metric", "subject", "level", "state", "value", "team", "job"]
        fields += ["node", "started_at", "fired_at", "acknowledged_at", "acknowledged_by"]
        fields += ["resolved_at"]
        read_only_fields = fields


def _choice(request: Request, name: str, choices: tuple[str, ...], default: str) -> str:
    value = request.query_params.get(name, default)
    if value not in choices:
        message = _("must be one of %(choices)s, got %(value)r")
        raise ValidationError({name: [message % {"choices": ", ".join(choices), "value": value}]})
    return value


@extend_schema(
    parameters=[
        OpenApiParameter("state", OpenApiTypes.STR, enum=STATES, description="default live"),
        OpenApiParameter("level", OpenApiTypes.STR, enum=Level.values),
    ]
)
class AlertListView(generics.ListAPIView[Alert]):
    """`GET /api/v1/alerts/`: newest first."""

    serializer_class = AlertSerializer

    def get_queryset(self) -> QuerySet[Alert]:
        alerts = visible_alerts(self.request.user).select_related("acknowledged_by")
        state = _choice(self.request, "state", STATES, "live")
        if state == "live":
            alerts = alerts.filter(state__in=LIVE_ALERT_STATES)
        elif state != "all":
            alerts = alerts.filter(state=state)
        level = _choice(self.request, "level", ("", *Level.values), "")
        return alerts.filter(level=level) if level else alerts


class AlertAcknowledgeView(APIView):
    """`POST /api/v1/alerts/{id}/acknowledge/`: someone is on it (platform admins)."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=None, responses=AlertSerializer)
    def post(self, request: Request, alert_id: int) -> Response:
        alert = get_object_or_404(Alert.objects.select_related("rule", "team"), pk=alert_id)
        acknowledge(alert, acting_user=signed_in(request))
        return Response(AlertSerializer(alert).data)


urls = [
    path("alerts/", AlertListView.as_view(), name="alerts-api"),
    path(
        "alerts/<int:alert_id>/acknowledge/",
        AlertAcknowledgeView.as_view(),
        name="alert-acknowledge-api",
    ),
]
