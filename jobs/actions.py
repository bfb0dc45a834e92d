"""Job actions: submit, cancel, clone. Each validates, writes, and records one audit event."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, TypeVar

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from audit.record import audit_event, record
from jobs.limits import Limits, read_limits
from jobs.models import TERMINAL_STATES, Job, JobEvent, State
from jobs.spec import JobSpec, SpecError, check_spec, masked_env, node_misfits, parse_spec
from jobs.states import transition
from jobs.submission import write_submission
from quotas.models import GpuType, Queue
from tenants.models import Team

if TYPE_CHECKING:
    from django.contrib.auth.models import User

DEFAULT_QUEUE = "normal"
T = TypeVar("T")


def _limits(team: Team, user: User, gpu_type: str) -> Limits:
    found = read_limits(team, user, gpu_type)
    if found is None:  # deleted since the caller read it
        raise SpecError({"team": _("team %(team)s does not exist") % {"team": team.slug}})
    return found


def _queue(team: Team, spec: JobSpec, queues: dict[str, Queue]) -> Queue:
    if spec.queue is not None:
        if spec.queue not in queues:
            message = _("team %(team)s has no queue %(queue)r")
            raise SpecError({"queue": message % {"team": team.slug, "queue": spec.queue}})
        return queues[spec.queue]
    if DEFAULT_QUEUE in queues:
        return queues[DEFAULT_QUEUE]
    if len(queues) == 1:
        return next(iter(queues.values()))
    names = ", ".join(sorted(queues)) or _("none")
    message = _("is required (team %(team)s has: %(queues)s)")
    raise SpecError({"queue": message % {"team": team.slug, "queues": names}})


def _quota(team: Team, spec: JobSpec, limits: Limits) -> tuple[GpuType, int]:
    """The spec's GPU type and the team's limit of it, or the reason there is none."""
    if limits.gpu_type is None:
        known = ", ".join(GpuType.objects.values_list("name", flat=True))
        message = _("unknown GPU type %(gpu_type)r (known: %(known)s)")
        raise SpecError({"gpu_type": message % {"gpu_type": spec.gpu_type, "known": known}})
    if limits.limit is None:
        message = _("team %(team)s has no quota for %(gpu_type)s")
        raise SpecError({"gpu_type": message % {"team": team.slug, "gpu_type": spec.gpu_type}})
    return limits.gpu_type, limits.limit


def _check_image(team: Team, image: str) -> None:
    if not team.image_allowed(image):
        allowed = team.allowed_image_prefixes()
        message = _("%(image)s is not on team %(team)s's allow-list (%(allowed)s)")
        raise SpecError(
            {"image": message % {"image": image, "team": team.slug, "allowed": ", ".join(allowed)}}
        )


def _fit_problems(
    team: Team,
    spec: JobSpec,
    gpu_type: GpuType,
    limit: int | None,
    cap: int | None,
    queue: Queue | None,
    skip: Collection[str] = (),
) -> dict[str, str]:
    """Every limit the job crosses that would keep it from ever running, by field; a field in
    `skip` (found faulty already) is not judged again."""
    problems: dict[str, str] = {}
    if "gpus_per_node" not in skip and spec.gpus_per_node > gpu_type.gpus_per_node:
        message = _("%(asked)d requested, nodes of type %(gpu_type)s have %(most)d")
        figures = {"asked": spec.gpus_per_node, "gpu_type": gpu_type.name}
        problems["gpus_per_node"] = message % {**figures, "most": gpu_type.gpus_per_node}
    misfits = node_misfits(
        spec, gpu_type.name, gpu_type.node_cpu_millis, gpu_type.node_memory_bytes
    )
    problems.update({key: text for key, text in misfits.items() if key not in skip})
    if "nodes" in skip or "gpus_per_node" in problems or "gpus_per_node" in skip:
        return problems | _runtime_problem(spec, queue, skip)
    # One pod per node: more pods than nodes never start. (A single pod needs no count, and
    # a type with no node seen yet has nothing to refuse by.)
    node_count = gpu_type.nodes.count() if spec.nodes > 1 else 0
    total = spec.nodes * spec.gpus_per_node
    if node_count and spec.nodes > node_count:
        message = _("%(asked)d requested, the cluster has %(count)d nodes of type %(gpu_type)s")
        figures = {"asked": spec.nodes, "count": node_count, "gpu_type": gpu_type.name}
        problems["nodes"] = message % figures
    elif limit is not None and total > limit:
        message = _(
            "nodes × gpus_per_node = %(total)d GPUs requested, team %(team)s's limit of "
            "%(gpu_type)s is %(limit)d"
        )
        figures = {"total": total, "team": team.slug, "gpu_type": gpu_type.name, "limit": limit}
        problems["nodes"] = message % figures
    elif cap is not None and total > cap:
        message = _(
            "nodes × gpus_per_node = %(total)d GPUs requested, your cap in team %(team)s is %(cap)d"
        )
        problems["nodes"] = message % {"total": total, "team": team.slug, "cap": cap}
    return problems | _runtime_problem(spec, queue, skip)


def _runtime_problem(spec: JobSpec, queue: Queue | None, skip: Collection[str]) -> dict[str, str]:
    if queue is None or "max_runtime" in skip or spec.max_runtime is None:
        return {}
    if spec.max_runtime > queue.max_runtime:
        message = _("%(asked)d s requested, queue %(queue)s allows at most %(most)d s")
        figures = {"asked": spec.max_runtime, "queue": queue.name, "most": queue.max_runtime}
        return {"max_runtime": message % figures}
    return {}


def _caught(problems: dict[str, str], skip: Collection[str], check: Callable[[], T]) -> T | None:
    """`check()`'s result, or None with its problems added to `problems` (but those of a field
    in `skip`)."""
    try:
        return check()
    except SpecError as exc:
        for key, message in exc.errors.items():
            if key not in skip:
                problems.setdefault(key, message)
        return None


def team_problems(
    team: Team, spec: JobSpec, acting_user: User, skip: Collection[str] = ()
) -> tuple[tuple[Queue, GpuType, int, int | None] | None, dict[str, str]]:
    """What `spec` resolves to in `team` (queue, GPU type, the team's limit of it, the member's
    cap), or None, and every problem found at once: queue, quota, image, caps and limits. A
    field in `skip` (its shape found faulty already) is not judged again."""
    if spec.team is not None and spec.team != team.slug:
        message = _("spec names team %(named)r but was submitted to %(team)s")
        return None, {"team": message % {"named": spec.team, "team": team.slug}}
    limits = _limits(team, acting_user, spec.gpu_type)
    if not limits.member and not acting_user.is_staff:
        return None, {"team": _("you are not a member of team %(team)s") % {"team": team.slug}}
    problems: dict[str, str] = {}
    queue = None
    if "queue" not in skip:
        queue = _caught(problems, skip, lambda: _queue(team, spec, limits.queues))
    if "gpu_type" not in skip:
        _caught(problems, skip, lambda: _quota(team, spec, limits))
    if "image" not in skip:
        _caught(problems, skip, lambda: _check_image(team, spec.image))
    if limits.gpu_type is not None and "gpu_type" not in skip:
        fits = _fit_problems(team, spec, limits.gpu_type, limits.limit, limits.cap, queue, skip)
        problems.update({key: text for key, text in fits.items() if key not in problems})
    if problems or queue is None or limits.gpu_type is None or limits.limit is None:
        return None, problems
    return (queue, limits.gpu_type, limits.limit, limits.cap), problems


def submit_data(
    team: Team,
    data: object,
    *,
    acting_user: User,
    faulty: Mapping[str, str] | None = None,
    cloned_from: Job | None = None,
) -> Job:
    """Submit a spec as a page sends it, refusing with every problem at once: its shape and the
    team's queues, quota, image list, caps and limits together. `faulty` are problems the
    caller found already (a form's own), reported with the rest; `cloned_from`, the job the
    spec was copied from and edited."""
    found = dict(faulty or {})
    spec, shape = check_spec(data)
    problems = {**shape, **found}
    if spec is not None and not (problems.keys() & {"team", "spec"}):
        _, more = team_problems(team, spec, acting_user, skip=problems.keys())
        problems = {**more, **problems}
    if problems or spec is None:
        raise SpecError(problems)
    if cloned_from is not None:
        return _create(
            team, spec, acting_user=acting_user, action="job.clone", cloned_from=cloned_from
        )
    return submit_job(team, spec, acting_user=acting_user)


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
    resolved, problems = team_problems(team, spec, acting_user)
    if resolved is None:
        raise SpecError(problems)
    queue, gpu_type, _limit, _cap = resolved
    job = Job(
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
    event = JobEvent(team=team, job=job, to_state=State.QUEUED, reason=action, actor=acting_user)
    audit = audit_event(action, actor=acting_user, team=team, after=_audit_view(job))
    with transaction.atomic():
        write_submission(job, event, audit)
    return job


def submit_job(team: Team, spec: JobSpec, *, acting_user: User) -> Job:
    """Validate a spec against the team's queues, quota and caps, and queue the job."""
    return _create(team, spec, acting_user=acting_user, action="job.submit")


def cancel_job(job: Job, *, acting_user: User, reason: str = "cancelled by user") -> Job:
    """Cancel a job that has not ended; the controller stops whatever runs in the cluster."""
    with transaction.atomic():
        job = Job.objects.for_team(job.team).select_for_update(no_key=True).get(pk=job.pk)
        if job.state in TERMINAL_STATES:
            message = _("job %(id)s has already ended (%(state)s)")
            raise ValidationError({"state": message % {"id": job.pk, "state": job.state}})
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
