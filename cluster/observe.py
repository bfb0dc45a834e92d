"""Map what Kubernetes reports about a portal job's Job and Pods onto the job's state.

Each function takes a raw object as the API serves it and moves the portal job accordingly,
inside the caller's transaction with the job row locked. Events about an older attempt (another
Job name) or about a job that has already ended change nothing, so replays and duplicates are
harmless. The rows come from a `LockedJobs` (cluster.locked), which locks a whole batch's jobs in
one query, and the moves go through its unit of work (`LockedJobs.moves`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import transaction

from audit.record import audit_event
from cluster import lease
from cluster.backend import Obj
from cluster.locked import LockedJobs
from cluster.manifests import LABEL_JOB, job_of_pod
from jobs.models import HOLDING_STATES, TERMINAL_STATES, Job, State
from jobs.states import Moves, transition

NODE_LOSS_REASONS = {"DeletionByTaintManager", "NodeLost", "Evicted", "TerminationByKubelet"}


def portal_job_id(obj: Obj) -> int | None:
    raw = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB)
    return int(raw) if raw and raw.isdigit() else None


def ids_of(objs: Iterable[Obj]) -> set[int]:
    """The portal job ids of these Jobs and Pods (objects without one are left out)."""
    return {job_id for obj in objs if (job_id := portal_job_id(obj)) is not None}


REPORT_FIELDS = (
    *("id", "team_id", "name", "state", "state_reason", "attempts", "exit_code", "placement"),
    *("nodes", "gpus_per_node", "max_runtime", "k8s_name", "grace_until", "preempted_for_id"),
    *("pending_code", "pending_message", "estimated_start", "submitted_at"),
    *("team__slug", "owner__username", "queue__name", "queue__priority", "gpu_type__name"),
)
"""What mapping cluster reports onto jobs reads, and their status messages show: loading the
whole spec (JSON command, args and env) and the owner's whole row for each job was the larger
part of a batch's cost. Anything else is loaded when first read."""


@contextmanager
def writing(holder: str, only: tuple[str, ...] = ()) -> Iterator[LockedJobs]:
    """One transaction in which job rows are locked together and their moves held in its unit
    of work (`LockedJobs.moves`), written when the block ends, just before the commit (the
    audit events last: see `jobs.states.Moves.flush`).

    It first checks that `holder` still leads (`cluster.lease.hold`, raising `lease.Lost`), and
    keeps the lease from changing hands until it ends: a stale leader writes nothing."""
    with transaction.atomic():
        lease.hold(holder)
        locked = LockedJobs(only)
        yield locked
        locked.moves.flush()


def _k8s_job_name(obj: Obj) -> str:
    if obj.get("kind") == "Job":
        return str(obj["metadata"]["name"])
    return str(
        ((obj.get("metadata") or {}).get("labels") or {}).get("batch.kubernetes.io/job-name", "")
    )


Deletion = tuple[str, str]
"""(namespace, name) of a Kubernetes Job to delete once the transaction commits."""


def requeue_or_fail(job: Job, reason: str, moves: Moves) -> Deletion:
    """NODE_FAILED, then back to the queue while attempts remain; returns the Job to delete."""
    deletion = (job.team.namespace, job.k8s_name)
    if job.state != State.NODE_FAILED:
        transition(job, State.NODE_FAILED, reason, moves=moves)
    if job.attempts < settings.JOB_MAX_ATTEMPTS:
        requeued = f"requeued after node failure (attempt {job.attempts})"
        transition(job, State.QUEUED, requeued, moves=moves)
        after = {"reason": reason}
        moves.audit(audit_event("job.requeue", actor=None, team=job.team, target=job, after=after))
    else:
        failed = f"{reason}; gave up after {job.attempts} attempts"
        transition(job, State.FAILED, failed, moves=moves)
    return deletion


def _terminated(pod: Obj) -> dict[str, Any] | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = status.get("state") or {}
        if "terminated" in state:
            return dict(state["terminated"])
    return None


def _lost_node(pod: Obj) -> str | None:
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return str(condition.get("reason") or "DisruptionTarget")
    if status.get("reason") in NODE_LOSS_REASONS:
        return str(status["reason"])
    return None


def pod_signature(pod: Obj) -> tuple[object, ...]:
    """The part of a pod that its portal job's state depends on."""
    terminated = _terminated(pod) or {}
    return ((pod.get("status") or {}).get("phase"), _lost_node(pod), terminated.get("exitCode"))


def job_signature(obj: Obj) -> tuple[object, ...]:
    return (_condition(obj, "Complete") is not None, _condition(obj, "Failed") is not None)


def pod_may_move(signature: tuple[object, ...]) -> bool:
    """Whether a pod in this state (`pod_signature`) can move its portal job: one pending or
    just scheduled cannot, and needs no job row."""
    phase, lost, exit_code = signature
    ended_badly = exit_code not in (0, None)
    return lost is not None or phase in ("Running", "Succeeded", "Failed") or ended_badly


def job_may_move(signature: tuple[object, ...]) -> bool:
    """Whether a Job in this state (`job_signature`) can move its portal job: only its end."""
    return any(signature)


def observe_pod(pod: Obj, locked: LockedJobs) -> Deletion | None:
    """Running pod → RUNNING; a pod lost with its node → NODE_FAILED and requeue."""
    job_id = portal_job_id(pod)
    if job_id is None or not pod_may_move(pod_signature(pod)):
        return None
    job = locked.get(job_id)
    if job is None or job.state not in HOLDING_STATES or job.k8s_name != _k8s_job_name(pod):
        return None
    node = (pod.get("spec") or {}).get("nodeName", "?")
    lost = _lost_node(pod)
    if lost is not None:
        reason = f"pod {pod['metadata']['name']} lost with node {node} ({lost})"
        return requeue_or_fail(job, reason, locked.moves)
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Running", "Succeeded", "Failed") and job.state == State.ADMITTED:
        running = f"pod {pod['metadata']['name']} running on {node}"
        transition(job, State.RUNNING, running, moves=locked.moves)
    terminated = _terminated(pod)
    if terminated is not None and terminated.get("exitCode", 0) != 0 and job.exit_code is None:
        job.exit_code = int(terminated["exitCode"])
        locked.moves.save(job, ["exit_code"])
    return None


def _condition(obj: Obj, kind: str) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return dict(condition)
    return None


def slim_job(obj: Obj) -> Obj:
    """The part of a Job that `observe_job` and reconciliation read, to keep for as long as
    the Job exists: finished Jobs stay an hour, and thousands of whole objects kept the
    garbage collector walking far more than the controller ever read."""
    meta, ttl = obj["metadata"], (obj.get("spec") or {}).get("ttlSecondsAfterFinished")
    return {
        "kind": obj.get("kind", "Job"),
        "metadata": {k: meta[k] for k in ("name", "namespace", "labels") if k in meta},
        "spec": {} if ttl is None else {"ttlSecondsAfterFinished": ttl},
        "status": {"conditions": (obj.get("status") or {}).get("conditions") or []},
    }


def awaits_ttl(obj: Obj) -> bool:
    """A finished Job without a TTL yet: kept until the portal has recorded its outcome."""
    return "ttlSecondsAfterFinished" not in (obj.get("spec") or {}) and any(job_signature(obj))


def slim_pod(pod: Obj) -> Obj:
    """The part of a Pod that mapping its Job's end reads (`_lost_node`, `_terminated`)."""
    status = pod.get("status") or {}
    return {
        "metadata": {
            k: pod["metadata"][k] for k in ("name", "namespace", "labels") if k in pod["metadata"]
        },
        "spec": {"nodeName": (pod.get("spec") or {}).get("nodeName")},
        "status": {
            "phase": status.get("phase"),
            "reason": status.get("reason"),
            "conditions": status.get("conditions") or [],
            "containerStatuses": [
                {"state": s.get("state") or {}} for s in status.get("containerStatuses") or []
            ],
        },
    }


def observe_job(obj: Obj, pods: list[Obj], locked: LockedJobs) -> Deletion | None:
    """The Job's Complete or Failed condition ends the portal job, with the reason."""
    job_id = portal_job_id(obj)
    complete, failed = _condition(obj, "Complete"), _condition(obj, "Failed")
    if job_id is None or not (complete or failed):
        return None
    job = locked.get(job_id)
    if job is None or job.state in TERMINAL_STATES or job.k8s_name != obj["metadata"]["name"]:
        return None
    if job.state not in HOLDING_STATES:
        return None
    lost = next((reason for pod in pods if (reason := _lost_node(pod))), None)
    moves = locked.moves
    if failed and lost:
        return requeue_or_fail(job, f"pods lost with their node ({lost})", moves)
    if job.state == State.ADMITTED:
        transition(job, State.RUNNING, "pods started", moves=moves)
    if complete:
        transition(job, State.SUCCEEDED, "completed", moves=moves, exit_code=0)
    else:
        transition(job, State.FAILED, _failure(job, failed or {}, pods, moves), moves=moves)
    return None


def _failure(job: Job, condition: dict[str, Any], pods: list[Obj], moves: Moves) -> str:
    if condition.get("reason") == "DeadlineExceeded":
        return f"deadline exceeded: ran past max_runtime of {job.max_runtime} s"
    codes = sorted({t["exitCode"] for p in pods if (t := _terminated(p)) and t.get("exitCode")})
    if codes:
        job.exit_code = codes[0]
        moves.save(job, ["exit_code"])
        return f"exit code {codes[0]}"
    return f"failed: {condition.get('reason', 'unknown')} {condition.get('message', '')}".strip()


def explain_admitted(event: Obj) -> bool:
    """A warning about an admitted job's pod (FailedScheduling, image pull...) becomes its reason.

    The job keeps its state: the cluster may still sort it out; the reason tells the owner why
    it has not started yet. Returns whether a job's reason changed.
    """
    involved = event.get("involvedObject") or {}
    owner = job_of_pod(str(involved.get("name", "")))
    if event.get("type") != "Warning" or involved.get("kind") != "Pod" or owner is None:
        return False
    job_id, k8s_name = owner
    reason = f"{event.get('reason', 'Warning')}: {event.get('message', '')}"[:255]
    updated = Job.unscoped.filter(pk=job_id, state=State.ADMITTED, k8s_name=k8s_name).update(
        state_reason=reason
    )
    return bool(updated)


def jobs_on_node(node: str) -> list[int]:
    return [
        job.pk
        for job in Job.unscoped.filter(state__in=HOLDING_STATES).only("id", "placement")
        if node in job.placement
    ]


def node_lost(node: str, locked: LockedJobs) -> list[Deletion]:
    """A node went NotReady: its jobs go back to the queue now rather than when pods time out."""
    deletions = []
    job_ids = jobs_on_node(node)
    locked.lock(job_ids)
    for job_id in job_ids:
        job = locked.get(job_id)
        if job is not None and job.state in HOLDING_STATES and node in job.placement:
            deletions.append(requeue_or_fail(job, f"node {node} is not ready", locked.moves))
    return deletions
