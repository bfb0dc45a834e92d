"""Typed messages pushed to websocket groups, and the group names (which carry the team).

Groups: `team.<team_id>.jobs` (every job of a team) and `team.<team_id>.job.<job_id>` (one job).
"""

from __future__ import annotations

from typing import Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from jobs.models import Job


class JobStatusMessage(TypedDict):
    """Sent when a job changes state."""

    type: Literal["job.status"]
    job_id: int
    name: str
    state: str
    reason: str
    at: str


def team_group(team_id: int) -> str:
    return f"team.{team_id}.jobs"


def job_group(team_id: int, job_id: int) -> str:
    return f"team.{team_id}.job.{job_id}"


def status_message(job: Job, at: str) -> JobStatusMessage:
    return {
        "type": "job.status",
        "job_id": job.pk,
        "name": job.name,
        "state": job.state,
        "reason": job.state_reason,
        "at": at,
    }


def publish_status(job: Job, at: str) -> None:
    """After the transaction commits, tell the job's and the team's subscribers."""
    message = status_message(job, at)
    layer = get_channel_layer()
    if layer is None:
        return

    def send() -> None:
        for group in (job_group(job.team_id, job.pk), team_group(job.team_id)):
            async_to_sync(layer.group_send)(group, dict(message))

    transaction.on_commit(send)
