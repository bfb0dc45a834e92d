"""`access_job`: the job, or the same 404 whether it is missing or another team's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils.translation import gettext as _

from jobs.models import Job
from tenants.access import can_manage_team

if TYPE_CHECKING:
    from tenants.scoping import AnyUser


def can_change_job(user: AnyUser, job: Job) -> bool:
    return user.is_authenticated and (job.owner_id == user.pk or can_manage_team(user, job.team))


def access_job(user: AnyUser, job_id: int | str, *, write: bool = False) -> Job:
    """Teammates may read a job; only its owner, the team's leads and admins may change it."""
    try:
        pk = int(job_id)
    except (TypeError, ValueError):
        raise Http404(_("No such job.")) from None
    job = (
        Job.objects.for_user(user)
        .select_related("team", "owner", "queue", "gpu_type")
        .filter(pk=pk)
        .first()
    )
    if job is None:
        raise Http404(_("No such job."))
    if write and not can_change_job(user, job):
        raise PermissionDenied(_("Only the job's owner and the team's leads can change this job."))
    return job
