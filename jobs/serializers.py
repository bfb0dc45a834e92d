"""How a job looks in the API: its spec (environment masked) plus where it stands.

Lists show a summary without the spec's bodies (command, args, env): an environment may hold a
megabyte, and every teammate's list would carry it.
"""

from functools import cache
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from jobs.models import Job, JobEvent, State
from jobs.spec import masked_env


class JobEventSerializer(serializers.ModelSerializer[JobEvent]):
    class Meta:
        model = JobEvent
        fields = ["from_state", "to_state", "reason", "at"]


class JobSummarySerializer(serializers.ModelSerializer[Job]):
    team = serializers.CharField(source="team.slug")
    owner = serializers.CharField(source="owner.username")
    queue = serializers.CharField(source="queue.name")
    gpu_type = serializers.CharField(source="gpu_type.name")
    cpu = serializers.CharField()
    reason = serializers.SerializerMethodField()
    estimated_start = serializers.SerializerMethodField()
    position = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "team",
            "queue",
            "image",
            "gpu_type",
            "gpus_per_node",
            "nodes",
            "cpu",
            "memory",
            "max_runtime",
            "state",
            "state_reason",
            "owner",
            "submitted_at",
            "admitted_at",
            "started_at",
            "finished_at",
            "placement",
            "reason",
            "estimated_start",
            "position",
            "exit_code",
            "cloned_from",
        ]
        read_only_fields = fields

    def get_reason(self, job: Job) -> dict[str, Any] | None:
        if not job.pending_code:
            return None
        return {
            "code": job.pending_code,
            "message": job.pending_message,
            "figures": job.pending_figures,
        }

    def get_estimated_start(self, job: Job) -> dict[str, Any] | None:
        """Never in the past: an estimate that has passed reads as "from now", with `passed`
        set (the job's `reason` says why it has not started)."""
        if job.estimated_start is None:
            return None
        now = timezone.now()
        latest = job.estimated_start_latest or job.estimated_start
        return {
            "earliest": max(job.estimated_start, now),
            "latest": max(latest, job.estimated_start, now),
            "passed": job.estimated_start < now,
        }

    def get_position(self, job: Job) -> dict[str, int] | None:
        """Place among all waiting jobs and among the team's, in the policy's order (1 first),
        as the scheduler last wrote it."""
        figures = job.pending_figures or {}
        if job.state != State.QUEUED or "queue_position" not in figures:
            return None
        return {"queue": figures["queue_position"], "team": figures["team_position"]}


class JobSerializer(JobSummarySerializer):
    env = serializers.SerializerMethodField()

    class Meta(JobSummarySerializer.Meta):
        fields = [*JobSummarySerializer.Meta.fields, "command", "args", "env"]
        read_only_fields = fields

    def get_env(self, job: Job) -> dict[str, str]:
        return masked_env(job.env)


class JobDetailSerializer(JobSerializer):
    events = JobEventSerializer(many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "events"]
        read_only_fields = fields


@cache
def _job_serializer() -> JobSerializer:
    serializer = JobSerializer()
    serializer.fields  # noqa: B018  (built here, once, not by two threads' first jobs)
    return serializer


def shown_job(job: Job) -> dict[str, Any]:
    """`JobSerializer(job).data`, through one serializer kept for every job: a ModelSerializer
    builds its fields from the model each time it is made (0.4-0.5 ms of CPU, as much as the
    rest of the answer to a submission), and showing a job only reads them."""
    return _job_serializer().to_representation(job)
