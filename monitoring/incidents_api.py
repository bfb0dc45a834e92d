"""`/api/v1/incidents/`: the fault loop's incidents for platform admins, and one incident with
its timeline. `urls` is what portal/urls.py includes."""

from __future__ import annotations

from django.db.models import QuerySet
from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, permissions, serializers
from rest_framework.exceptions import ValidationError

from monitoring.models import Incident, IncidentEvent, IncidentState

FIELDS = ["id", "title", "state", "action", "opened_at", "resolved_at", "nodes", "gpus", "jobs"]
FIELDS += ["teams"]


class IncidentSerializer(serializers.ModelSerializer[Incident]):
    class Meta:
        model = Incident
        fields = FIELDS
        read_only_fields = fields


class IncidentEventSerializer(serializers.ModelSerializer[IncidentEvent]):
    actor = serializers.CharField(source="actor.username", default=None)

    class Meta:
        model = IncidentEvent
        fields = ["at", "kind", "text", "actor"]
        read_only_fields = fields


class IncidentDetailSerializer(serializers.ModelSerializer[Incident]):
    events = IncidentEventSerializer(many=True, read_only=True)

    class Meta:
        model = Incident
        fields = [*FIELDS, "root_cause", "follow_ups", "events"]
        read_only_fields = fields


@extend_schema(parameters=[OpenApiParameter("state", OpenApiTypes.STR, enum=IncidentState.values)])
class IncidentListView(generics.ListAPIView[Incident]):
    """`GET /api/v1/incidents/`: newest first (`?state=open|resolved`)."""

    serializer_class = IncidentSerializer
    permission_classes = [permissions.IsAdminUser]

    def get_queryset(self) -> QuerySet[Incident]:
        state = self.request.query_params.get("state", "")
        if state and state not in IncidentState.values:
            message = _("must be one of %(choices)s, got %(value)r")
            choices = ", ".join(IncidentState.values)
            raise ValidationError({"state": [message % {"choices": choices, "value": state}]})
        incidents = Incident.objects.all()
        return incidents.filter(state=state) if state else incidents


class IncidentDetailView(generics.RetrieveAPIView[Incident]):
    """`GET /api/v1/incidents/{id}/`: what it touched, the post-mortem and the timeline."""

    serializer_class = IncidentDetailSerializer
    permission_classes = [permissions.IsAdminUser]
    lookup_url_kwarg = "incident_id"
    queryset = Incident.objects.prefetch_related("events__actor")


urls = [
    path("incidents/", IncidentListView.as_view(), name="incidents-api"),
    path("incidents/<int:incident_id>/", IncidentDetailView.as_view(), name="incident-detail-api"),
]
