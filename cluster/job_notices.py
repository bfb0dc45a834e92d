"""What the controller's decisions tell people: a preemption notice and its withdrawal reach the
job's owner, and a job that can never start as things are (NEVER_FITS) reaches its owner and
the team's leads. Written in the decisions' transaction (`notifications.send.notify`), so a
decision rolled back tells nobody, and deduplicated, so a new leader does not tell them twice."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING

from django.utils.translation import gettext as _

from jobs.models import Job, State
from jobs.reasons import reason_text
from notifications.send import notify
from scheduler import ReasonCode
from tenants.models import Membership, Role

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def _link(job: Job) -> str:
    return f"/jobs/{job.pk}/"


def preemption_notice(job: Job, for_job: int, deadline: datetime) -> None:
    title = _("Job %(name)s (%(id)d) will be preempted") % {"name": job.name, "id": job.pk}
    body = _(
        "It makes room for job %(for_job)d and stops by %(deadline)s UTC. Save a checkpoint: "
        "the deadline is also in the file /etc/podinfo/preemption-deadline, and SIGTERM "
        "comes before it."
    ) % {"for_job": for_job, "deadline": f"{deadline:%Y-%m-%d %H:%M:%S}"}
    notify(
        [job.owner],
        level="warning",
        title=title,
        body=body,
        link=_link(job),
        dedupe_key=f"preempt:{job.pk}:{deadline.isoformat()}",
        team=job.team,
    )


def notice_withdrawn(job: Job, for_job: int | None) -> None:
    title = _("Preemption of job %(name)s (%(id)d) withdrawn") % {"name": job.name, "id": job.pk}
    body = _("Job %(for_job)s no longer needs its GPUs: your job runs on.") % {
        "for_job": for_job if for_job is not None else "?"
    }
    notify([job.owner], level="info", title=title, body=body, link=_link(job), team=job.team)


def never_fits(job_ids: Collection[int]) -> None:
    """Tell the owners and leads of jobs that newly cannot start as things are."""
    if not job_ids:
        return
    jobs = Job.unscoped.filter(
        pk__in=job_ids, state=State.QUEUED, pending_code=ReasonCode.NEVER_FITS
    ).select_related("owner", "team")
    leads: dict[int, list[User]] = {}
    for membership in Membership.unscoped.filter(
        team__in={job.team_id for job in jobs}, role=Role.LEAD
    ).select_related("user"):
        leads.setdefault(membership.team_id, []).append(membership.user)
    for job in jobs:
        title = _("Job %(name)s (%(id)d) can never start as things are") % {
            "name": job.name,
            "id": job.pk,
        }
        why = reason_text(job.pending_code, job.pending_figures, job.pending_message)
        notify(
            [job.owner, *leads.get(job.team_id, [])],
            level="warning",
            title=title,
            body=why,
            link=_link(job),
            dedupe_key=f"never-fits:{job.pk}",
            team=job.team,
        )
