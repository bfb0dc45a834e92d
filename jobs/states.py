"""The job state machine. Every transition is checked here and leaves a JobEvent with a reason.

QUEUED → ADMITTED → RUNNING → SUCCEEDED | FAILED | CANCELLED; PREEMPTED and NODE_FAILED lead
back to QUEUED (NODE_FAILED may also end in FAILED when no retries are left).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from audit.record import record
from jobs.models import EXPLANATION_FIELDS, HOLDING_STATES, Job, JobEvent, State
from jobs.streams import publish_statuses
from portal.bulk import insert_rows, write_rows

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

AUDITED: dict[str, str] = {
    State.RUNNING: "job.running",
    State.SUCCEEDED: "job.succeeded",
    State.FAILED: "job.failed",
    State.NODE_FAILED: "job.node_lost",
}
"""Moves the cluster makes, which no action records: audited here, in the move's transaction.
Submissions, admissions, preemptions, requeues and cancellations are their actions' own."""

_TIMESTAMP_ON_ENTRY = {
    State.ADMITTED: "admitted_at",
    State.RUNNING: "started_at",
    State.SUCCEEDED: "finished_at",
    State.FAILED: "finished_at",
    State.CANCELLED: "finished_at",
}


class IllegalTransition(ValueError):
    """The state machine does not allow this move."""


@dataclass
class _Batch:
    """Moves made inside `batch()`, written when it ends."""

    jobs: dict[int, Job] = field(default_factory=dict)
    fields: dict[int, set[str]] = field(default_factory=dict)
    events: list[JobEvent] = field(default_factory=list)
    moved_at: dict[int, str] = field(default_factory=dict)
    usage_teams: dict[int, Any] = field(default_factory=dict)

    def flush(self) -> None:
        by_fields: dict[tuple[str, ...], list[Job]] = {}
        for job_id, job in self.jobs.items():
            by_fields.setdefault(tuple(sorted(self.fields[job_id])), []).append(job)
        # Held with the events (and the audit's writes) by `together()` where the caller opened
        # one. Nobody reads how many rows changed: the callers hold the rows locked.
        for fields, jobs in by_fields.items():
            write_rows(jobs, fields)
        insert_rows(self.events)
        publish_statuses(
            [(self.jobs[job_id], at) for job_id, at in self.moved_at.items()],
            list(self.usage_teams.values()),
        )


_current: ContextVar[_Batch | None] = ContextVar("transitions", default=None)


@contextmanager
def batch() -> Iterator[None]:
    """Write the transitions made inside together when the block ends.

    One UPDATE per set of changed fields, one INSERT for all the JobEvents, one status message
    per job (its newest state) and one usage message per team, instead of a round trip for each
    move. The caller holds the transaction; after an exception nothing is written (the
    transaction rolls back anyway). Inside an outer batch this joins it.
    """
    if _current.get() is not None:
        yield
        return
    pending = _Batch()
    token = _current.set(pending)
    try:
        yield
        pending.flush()
    finally:
        _current.reset(token)


def save(job: Job, fields: list[str]) -> None:
    """`job.save(update_fields=fields)`, or part of the batch's write when one is open."""
    pending = _current.get()
    if pending is None:
        job.save(update_fields=fields)
        return
    if pending.jobs.setdefault(job.pk, job) is not job:
        raise RuntimeError(f"job {job.pk} changed through two different objects in one batch")
    pending.fields.setdefault(job.pk, set()).update(fields)


def can_transition(job: Job, to_state: str) -> bool:
    return to_state in ALLOWED[job.state]


def transition(
    job: Job, to_state: str, reason: str, *, actor: User | None = None, **changes: Any
) -> None:
    """Move `job` to `to_state` (setting `changes` with it), saving it and its JobEvent, and
    its audit event where the move is one of `AUDITED`.

    The caller holds the transaction.
    """
    if not can_transition(job, to_state):
        raise IllegalTransition(f"job {job.pk}: {job.state} → {to_state} is not allowed")
    from_state, now = job.state, timezone.now()
    job.state, job.state_reason = to_state, reason[:255]
    for name, value in changes.items():
        setattr(job, name, value)
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
        changed += EXPLANATION_FIELDS
    event = JobEvent(
        team_id=job.team_id,
        job=job,
        at=now,
        from_state=from_state,
        to_state=to_state,
        reason=reason[:255],
        actor=actor,
    )
    usage_changed = (from_state in HOLDING_STATES) != (to_state in HOLDING_STATES)
    with batch():
        pending = _current.get()
        assert pending is not None
        save(job, changed)
        pending.events.append(event)
        pending.moved_at[job.pk] = now.isoformat()
        if usage_changed:
            pending.usage_teams.setdefault(job.team_id, job.team)
    if to_state in AUDITED:
        record(
            AUDITED[to_state],
            actor=actor,
            team=job.team,
            target=job,
            after={"reason": job.state_reason},
        )
