"""Read endpoints for live pages: a job's log and metrics, a team's live job list and usage."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from base.streaming import streamed
from jobs.access import access_job
from jobs.models import ACTIVE_STATES, Job
from jobs.streams import localised, status_message, usage_message
from monitoring.history import job_history
from monitoring.logs import log_text
from tenants.access import access_team

MAX_TAIL = 100_000
MAX_HISTORY_HOURS = 24 * 30


def _positive_int(request: Request, name: str, default: int | None, top: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= top:
        message = _("must be a whole number between 1 and %(most)d") % {"most": top}
        raise ValidationError({name: [message]})
    return int(raw)


class JobLogView(APIView):
    """`GET /api/v1/jobs/{id}/logs/`: the whole log as text/plain (`?pod=`, `?tail=N`)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("pod", OpenApiTypes.STR, description="only this pod's lines"),
            OpenApiParameter(
                "tail", OpenApiTypes.INT, description=f"the last N lines (≤ {MAX_TAIL})"
            ),
            OpenApiParameter("download", OpenApiTypes.BOOL, description="as an attachment"),
        ],
        responses={(200, "text/plain"): OpenApiTypes.STR},
    )
    def get(self, request: Request, job_id: int) -> StreamingHttpResponse:
        job = access_job(request.user, job_id)
        tail = _positive_int(request, "tail", None, MAX_TAIL)
        pod = request.query_params.get("pod") or None
        response = streamed(
            request, log_text(job, pod, tail), content_type="text/plain; charset=utf-8"
        )
        if request.query_params.get("download"):
            response["Content-Disposition"] = f'attachment; filename="job-{job.pk}.log"'
        return response


class JobMetricsView(APIView):
    """`GET /api/v1/jobs/{id}/metrics/`: per-GPU minute history (`?hours=`, 24) and totals."""

    @extend_schema(
        parameters=[OpenApiParameter("hours", OpenApiTypes.INT, description="history, default 24")],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request, job_id: int) -> Response:
        job = access_job(request.user, job_id)
        hours = _positive_int(request, "hours", 24, MAX_HISTORY_HOURS) or 24
        return Response(job_history(job, hours))


class TeamLiveView(APIView):
    """`GET /api/v1/teams/{slug}/live/`: the team's active jobs and GPUs against quota, now."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, team_slug: str) -> Response:
        team = access_team(request.user, team_slug)
        jobs = (
            Job.objects.for_team(team)
            .filter(state__in=ACTIVE_STATES)
            .select_related("owner", "queue", "gpu_type", "team")
            .order_by("submitted_at", "id")
        )
        rows = [localised(status_message(job, at="")) for job in jobs]
        return Response({"team": team.slug, "jobs": rows, "usage": usage_message(team)["rows"]})
