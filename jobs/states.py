"""The job state machine. Every transition is checked here and leaves a JobEvent with a reason.

QUEUED → ADMITTED → RUNNING → SUCCEEDED | FAILED | CANCELLED; PREEMPTED and NODE_FAILED lead
back to QUEUED (NODE_FAILED may also end in FAILED when no retries are left).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils import timezone

from jobs.models import Job, JobEvent, State
from jobs.streams import publish_status

if TYPE_CHECKING:
    from django.contrib.auth.models import User

ALLOWED: dict[str, frozenset[str]] = {
    State.QUEUED: frozenset({State.ADMITTED, State.CANCELLED}),
    State.ADMITTED: frozenset(
        {State.RUNNING, State.FAILED, State.CANCELLED, State.PREEMPTED, State.NODE_FAILED}
    ),
    State.RUNNING: frozenset(
        {State.SUCCEEDED, State.FAILED, State.CANCELLED, State.PREEMPTED, State.NODE_FAILED}
    ),
    State.PREEMPTED: frozenset({State.QUEUED, State.CANCELLED}),
    State.NODE_FAILED: frozenset({State.QUEUED, State.FAILED, State.CANCELLED}),
    State.SUCCEEDED: frozenset(),
    State.FAILED: frozenset(),
    State.CANCELLED: frozenset(),
}

_TIMESTAMP_ON_ENTRY = {
    State.ADMITTED: "admitted_at",
    State.RUNNING: "started_at",
    State.SUCCEEDED: "finished_at",
    State.FAILED: "finished_at",
    State.CANCELLED: "finished_at",
}


class IllegalTransition(ValueError):
    """The state machine does not allow this move."""


def can_transition(job: Job, to_state: str) -> bool:
    return to_state in ALLOWED[job.state]


def transition(
    job: Job, to_state: str, reason: str, *, actor: User | None = None, **changes: Any
) -> JobEvent:
    """Move `job` to `to_state` (setting `changes` with it), saving it and its JobEvent.

    The caller holds the transaction.
    """
    if not can_transition(job, to_state):
        raise IllegalTransition(f"job {job.pk}: {job.state} → {to_state} is not allowed")
    from_state, now = job.state, timezone.now()
    job.state, job.state_reason = to_state, reason[:255]
    for field, value in changes.items():
        setattr(job, field, value)
    changed = ["state", "state_reason", *changes]
    stamp = _TIMESTAMP_ON_ENTRY.get(State(to_state))
    if stamp:
        setattr(job, stamp, now)
        changed.append(stamp)
    if to_state == State.QUEUED:
        # Back in the queue: nothing of the previous attempt's placement or preemption remains.
        job.placement, job.admitted_at, job.started_at, job.k8s_name = {}, None, None, ""
        job.grace_until, job.preempted_for = None, None
        changed += [
            "placement",
            "admitted_at",
            "started_at",
            "k8s_name",
            "grace_until",
            "preempted_for",
        ]
    if to_state != State.QUEUED:
        job.pending_code, job.pending_message, job.pending_figures = "", "", {}
        job.estimated_start = job.estimated_start_latest = None
        changed += [
            "pending_code",
            "pending_message",
            "pending_figures",
            "estimated_start",
            "estimated_start_latest",
        ]
    job.save(update_fields=changed)
    holding = {State.ADMITTED, State.RUNNING}
    publish_status(job, now.isoformat(), usage=(from_state in holding) != (to_state in holding))
    return JobEvent.objects.create(
        team_id=job.team_id,
        job=job,
        from_state=from_state,
        to_state=to_state,
        reason=reason[:255],
        actor=actor,
    )
