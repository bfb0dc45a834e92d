"""Job actions: submit, cancel, clone. Each validates, writes, and records one audit event."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import transaction

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
    queues = Queue.objects.for_team(team)
    if spec.queue is not None:
        found = queues.filter(name=spec.queue).first()
        if found is None:
            raise SpecError({"queue": f"team {team.slug} has no queue {spec.queue!r}"})
        return found
    names = list(queues.values_list("name", flat=True))
    if DEFAULT_QUEUE in names:
        return queues.get(name=DEFAULT_QUEUE)
    if len(names) == 1:
        return queues.get()
    raise SpecError({"queue": f"is required (team {team.slug} has: {', '.join(names) or 'none'})"})


def _gpu_type(spec: JobSpec) -> GpuType:
    found = GpuType.objects.filter(name=spec.gpu_type).first()
    if found is None:
        known = ", ".join(GpuType.objects.values_list("name", flat=True))
        raise SpecError({"gpu_type": f"unknown GPU type {spec.gpu_type!r} (known: {known})"})
    return found


def _check_image(team: Team, image: str) -> None:
    allowed = team.allowed_image_prefixes()
    if allowed and not any(image.startswith(prefix) for prefix in allowed):
        raise SpecError(
            {"image": f"{image} is not on team {team.slug}'s allow-list ({', '.join(allowed)})"}
        )


def _check_fits(team: Team, user: User, spec: JobSpec, gpu_type: GpuType, queue: Queue) -> None:
    """Refuse a job that could never run, with the limit it crosses."""
    if spec.gpus_per_node > gpu_type.gpus_per_node:
        raise SpecError(
            {
                "gpus_per_node": f"{spec.gpus_per_node} requested, nodes of type "
                f"{gpu_type.name} have {gpu_type.gpus_per_node}"
            }
        )
    quota = Quota.objects.for_team(team).filter(gpu_type=gpu_type).first()
    if quota is None or quota.limit == 0:
        raise SpecError({"gpu_type": f"team {team.slug} has no quota for {gpu_type.name}"})
    total = spec.nodes * spec.gpus_per_node
    if total > quota.limit:
        raise SpecError(
            {
                "nodes": f"nodes × gpus_per_node = {total} GPUs requested, team {team.slug}'s "
                f"limit of {gpu_type.name} is {quota.limit}"
            }
        )
    cap = MemberCap.objects.for_team(team).filter(user=user).first()
    if cap is not None and total > cap.max_gpus:
        raise SpecError(
            {
                "nodes": f"nodes × gpus_per_node = {total} GPUs requested, your cap in team "
                f"{team.slug} is {cap.max_gpus}"
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
    if (
        not acting_user.is_staff
        and not Membership.objects.for_team(team).filter(user=acting_user).exists()
    ):
        raise SpecError({"team": f"you are not a member of team {team.slug}"})
    if spec.team is not None and spec.team != team.slug:
        raise SpecError({"team": f"spec names team {spec.team!r} but was submitted to {team.slug}"})
    queue = _queue(team, spec)
    gpu_type = _gpu_type(spec)
    _check_image(team, spec.image)
    _check_fits(team, acting_user, spec, gpu_type, queue)
    with transaction.atomic():
        job = Job.objects.create(
            team=team,
            owner=acting_user,
            queue=queue,
            gpu_type=gpu_type,
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
        job = Job.objects.for_team(job.team).select_for_update().get(pk=job.pk)
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
