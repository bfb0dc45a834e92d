"""`/api/v1/jobs/`: list, submit, read, cancel and clone jobs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from base.auth import signed_in
from jobs.access import access_job
from jobs.actions import cancel_job, clone_job, submit_job
from jobs.limits import sole_team
from jobs.models import SPEC_BODIES, Job, State
from jobs.serializers import (
    JobDetailSerializer,
    JobSerializer,
    JobSummarySerializer,
    shown_job,
)
from jobs.spec import SpecError, parse_spec
from tenants.access import access_team
from tenants.models import Team
from tenants.viewsets import TenantViewSet


def team_for_submission(user: Any, slug: str | None) -> Team:
    """The spec's team, or the submitter's only team when the spec names none."""
    if slug is not None:
        return access_team(user, slug)
    team = sole_team(user)
    if team is None:
        raise SpecError({"team": "is required unless you belong to exactly one team"})
    return team


@extend_schema(
    parameters=[
        OpenApiParameter("state", OpenApiTypes.STR, description="Comma-separated states."),
        OpenApiParameter("team", OpenApiTypes.STR, description="Team slug."),
        OpenApiParameter("mine", OpenApiTypes.BOOL, description="Only my jobs."),
    ]
)
class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    model = Job
    related = ("team", "owner", "queue", "gpu_type")
    serializer_class = JobSummarySerializer

    def get_serializer_class(self) -> type[JobSummarySerializer]:
        return JobDetailSerializer if self.action == "retrieve" else JobSummarySerializer

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        params = self.request.query_params
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("events")
        elif self.action == "list":  # a summary: the spec's bodies stay in the database
            queryset = queryset.defer(*SPEC_BODIES)
        if states := params.get("state"):
            wanted = [s.strip().upper() for s in states.split(",")]
            unknown = set(wanted) - set(State.values)
            if unknown:
                raise SpecError({"state": f"unknown state(s): {', '.join(sorted(unknown))}"})
            queryset = queryset.filter(state__in=wanted)
        if team := params.get("team"):
            queryset = queryset.filter(team__slug=team)
        if params.get("mine") in ("1", "true"):
            queryset = queryset.filter(owner=signed_in(self.request))
        return queryset

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: JobSerializer})
    def create(self, request: Request) -> Response:
        """Submit a job spec (JSON, the same schema as the form's YAML)."""
        spec = parse_spec(request.data)
        team = team_for_submission(request.user, spec.team)
        job = submit_job(team, spec, acting_user=signed_in(request))
        return Response(shown_job(job), status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        job = access_job(request.user, pk, write=True)
        job = cancel_job(job, acting_user=signed_in(request))
        return Response(shown_job(job))

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: JobSerializer})
    @action(detail=True, methods=["post"])
    def clone(self, request: Request, pk: str) -> Response:
        job = access_job(request.user, pk, write=True)
        name = request.data.get("name") if isinstance(request.data, dict) else None
        clone = clone_job(job, acting_user=signed_in(request), name=name)
        return Response(shown_job(clone), status=status.HTTP_201_CREATED)
