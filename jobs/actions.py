"""Job actions: submit, cancel, clone. Each validates, writes, and records one audit event."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Subquery

from audit.record import record
from jobs.models import TERMINAL_STATES, Job, State
from jobs.spec import JobSpec, SpecError, masked_env, parse_spec
from jobs.states import transition
from quotas.models import GpuType, MemberCap, Queue, Quota
from tenants.models import Membership, Team

if TYPE_CHECKING:
    from django.contrib.auth.models import User

DEFAULT_QUEUE = "normal"


def _queue(team: Team, spec: JobSpec) -> Queue:
    # Unordered: the models' default orderings join the team table just to sort by its slug.
    queues = {queue.name: queue for queue in Queue.objects.for_team(team).order_by()}
    if spec.queue is not None:
        if spec.queue not in queues:
            raise SpecError({"queue": f"team {team.slug} has no queue {spec.queue!r}"})
        return queues[spec.queue]
    if DEFAULT_QUEUE in queues:
        return queues[DEFAULT_QUEUE]
    if len(queues) == 1:
        return next(iter(queues.values()))
    names = ", ".join(sorted(queues)) or "none"
    raise SpecError({"queue": f"is required (team {team.slug} has: {names})"})


def _quota(team: Team, spec: JobSpec) -> Quota:
    """The team's quota of the spec's GPU type (with the type), or the reason there is none."""
    quota = (
        Quota.objects.for_team(team)
        .select_related("gpu_type")
        .filter(gpu_type__name=spec.gpu_type, limit__gt=0)
        .order_by("pk")
        .first()
    )
    if quota is not None:
        return quota
    if not GpuType.objects.filter(name=spec.gpu_type).exists():
        known = ", ".join(GpuType.objects.values_list("name", flat=True))
        raise SpecError({"gpu_type": f"unknown GPU type {spec.gpu_type!r} (known: {known})"})
    raise SpecError({"gpu_type": f"team {team.slug} has no quota for {spec.gpu_type}"})


def _member_cap(team: Team, user: User) -> int | None:
    """The member's GPU cap in the team; refuses a user who is not a member (staff aside)."""
    cap = MemberCap.objects.for_team(team).filter(user=user).order_by().values("max_gpus")
    found = (
        Membership.objects.for_team(team)
        .filter(user=user)
        .order_by()
        .annotate(cap=Subquery(cap[:1]))
        .values_list("cap", flat=True)
    )
    caps = list(found)
    if not caps and not user.is_staff:
        raise SpecError({"team": f"you are not a member of team {team.slug}"})
    return caps[0] if caps else None


def _check_image(team: Team, image: str) -> None:
    allowed = team.allowed_image_prefixes()
    if allowed and not any(image.startswith(prefix) for prefix in allowed):
        raise SpecError(
            {"image": f"{image} is not on team {team.slug}'s allow-list ({', '.join(allowed)})"}
        )


def _check_fits(team: Team, spec: JobSpec, quota: Quota, cap: int | None, queue: Queue) -> None:
    """Refuse a job that could never run, with the limit it crosses."""
    gpu_type = quota.gpu_type
    if spec.gpus_per_node > gpu_type.gpus_per_node:
        raise SpecError(
            {
                "gpus_per_node": f"{spec.gpus_per_node} requested, nodes of type "
                f"{gpu_type.name} have {gpu_type.gpus_per_node}"
            }
        )
    total = spec.nodes * spec.gpus_per_node
    if total > quota.limit:
        raise SpecError(
            {
                "nodes": f"nodes × gpus_per_node = {total} GPUs requested, team {team.slug}'s "
                f"limit of {gpu_type.name} is {quota.limit}"
            }
        )
    if cap is not None and total > cap:
        raise SpecError(
            {
                "nodes": f"nodes × gpus_per_node = {total} GPUs requested, your cap in team "
                f"{team.slug} is {cap}"
            }
        )
    if spec.max_runtime is not None and spec.max_runtime > queue.max_runtime:
        raise SpecError(
            {
                "max_runtime": f"{spec.max_runtime} s requested, queue {queue.name} allows at "
                f"most {queue.max_runtime} s"
            }
        )


def _audit_view(job: Job) -> dict[str, object]:
    return {
        "name": job.name,
        "queue": job.queue.name,
        "image": job.image,
        "command": job.command,
        "args": job.args,
        "env": masked_env(job.env),
        "gpu_type": job.gpu_type.name,
        "gpus_per_node": job.gpus_per_node,
        "nodes": job.nodes,
        "cpu": str(job.cpu),
        "memory": job.memory,
        "max_runtime": job.max_runtime,
        "state": job.state,
    }


def _create(
    team: Team, spec: JobSpec, *, acting_user: User, action: str, cloned_from: Job | None = None
) -> Job:
    if spec.team is not None and spec.team != team.slug:
        raise SpecError({"team": f"spec names team {spec.team!r} but was submitted to {team.slug}"})
    cap = _member_cap(team, acting_user)
    queue = _queue(team, spec)
    quota = _quota(team, spec)
    _check_image(team, spec.image)
    _check_fits(team, spec, quota, cap, queue)
    with transaction.atomic():
        job = Job.objects.create(
            team=team,
            owner=acting_user,
            queue=queue,
            gpu_type=quota.gpu_type,
            name=spec.name,
            image=spec.image,
            command=spec.command,
            args=spec.args,
            env=spec.env,
            gpus_per_node=spec.gpus_per_node,
            nodes=spec.nodes,
            cpu=spec.cpu,
            memory=spec.memory,
            max_runtime=spec.max_runtime or queue.max_runtime,
            cloned_from=cloned_from,
        )
        job.events.create(team=team, to_state=State.QUEUED, reason=action, actor=acting_user)
        record(action, actor=acting_user, team=team, target=job, after=_audit_view(job))
    return job


def submit_job(team: Team, spec: JobSpec, *, acting_user: User) -> Job:
    """Validate a spec against the team's queues, quota and caps, and queue the job."""
    return _create(team, spec, acting_user=acting_user, action="job.submit")


def cancel_job(job: Job, *, acting_user: User, reason: str = "cancelled by user") -> Job:
    """Cancel a job that has not ended; the controller stops whatever runs in the cluster."""
    with transaction.atomic():
        job = Job.objects.for_team(job.team).select_for_update(no_key=True).get(pk=job.pk)
        if job.state in TERMINAL_STATES:
            raise ValidationError({"state": f"job {job.pk} has already ended ({job.state})"})
        before = {"state": job.state}
        transition(job, State.CANCELLED, reason, actor=acting_user)
        record(
            "job.cancel",
            actor=acting_user,
            team=job.team,
            target=job,
            before=before,
            after={"state": job.state, "reason": reason},
        )
    return job


def clone_job(job: Job, *, acting_user: User, name: str | None = None) -> Job:
    """Submit a copy of a job's spec (optionally under a new name)."""
    spec = parse_spec(
        {
            "name": name or job.name,
            "team": job.team.slug,
            "queue": job.queue.name,
            "image": job.image,
            "command": list(job.command),
            "args": list(job.args),
            "env": dict(job.env),
            "gpu_type": job.gpu_type.name,
            "gpus_per_node": job.gpus_per_node,
            "nodes": job.nodes,
            "cpu": str(job.cpu),
            "memory": job.memory,
            "max_runtime": job.max_runtime,
        }
    )
    return _create(job.team, spec, acting_user=acting_user, action="job.clone", cloned_from=job)
