"""`{% right_sizing_hint job as hint %}`: "asked 8 GPUs, 2 were used above 5 %" for the job
page (templates/jobs/detail.html), which `jobs` renders without importing monitoring."""

from __future__ import annotations

from django import template

from jobs.models import Job
from monitoring.gpu_use import job_use, right_sizing_hint
from monitoring.idle_policy import idle_rules

register = template.Library()


@register.simple_tag
def right_sizing_hint_of(job: Job) -> str:
    """The hint over the job's last run ("" before it ran, or when every GPU did work)."""
    if job.started_at is None:
        return ""
    since = int(job.started_at.timestamp()) // 60 * 60
    use = job_use([job.pk], since).get(job.pk)
    threshold = idle_rules([job.team_id])[job.team_id].util_pct
    return right_sizing_hint(job.total_gpus, use, threshold)
