"""`/api/v1/audit/`: the audit trail, scoped (leads: their teams; admins: all), and CSV export."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request

from audit.models import AuditEvent, AuditQuerySet
from audit.query import csv_response, filtered_events

FILTERS = [
    OpenApiParameter(name, OpenApiTypes.STR, description=text)
    for name, text in (
        ("team", "Team slug."),
        ("action", "Action, or its prefix (job., quota.)."),
        ("actor", "Username."),
        ("since", "ISO date or date-time, inclusive."),
        ("until", "ISO date or date-time, exclusive."),
    )
]


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    class Meta:
        model = AuditEvent
        fields = [
            "seq",
            "at",
            "actor_name",
            "team_slug",
            "action",
            "target_type",
            "target_id",
            "before",
            "after",
            "request_id",
            "ip",
            "hash",
        ]


@extend_schema(parameters=FILTERS)
class AuditViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = AuditEventSerializer

    def get_queryset(self) -> AuditQuerySet:
        return filtered_events(self.request.user, self.request.query_params)

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
    @action(detail=False, methods=["get"])
    def export(self, request: Request) -> StreamingHttpResponse:
        return csv_response(request, self.get_queryset())
