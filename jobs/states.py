"""The job state machine. Every transition is checked here and leaves a JobEvent with a reason.

QUEUED → ADMITTED → RUNNING → SUCCEEDED | FAILED | CANCELLED; PREEMPTED and NODE_FAILED lead
back to QUEUED (NODE_FAILED may also end in FAILED when no retries are left).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from audit.models import AuditEvent
from audit.record import BATCH_EVENTS, append, audit_event
from base.bulk_update import update_rows
from jobs.models import EXPLANATION_FIELDS, HOLDING_STATES, Job, JobEvent, State
from jobs.streams import publish_statuses

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tenants.models import Team

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


MoveListener = Callable[[Sequence[JobEvent]], None]
_listeners: list[MoveListener] = []


def on_flush(listener: MoveListener) -> None:
    """Have `listener` write, with every flush of moves and in its transaction, what follows
    from them (`billing` opens and closes usage segments): apps above `jobs` hear of a job's
    moves without `jobs` importing them. It gets the flush's JobEvents, oldest first, each
    `at` its move's time, before they are inserted; their job objects are as the last move
    left them. It must write in bulk, as the flush does: a flush may hold hundreds of moves."""
    if listener not in _listeners:
        _listeners.append(listener)


class Moves:
    """A unit of work: job changes, their JobEvents and audit events, held until `flush()`.

    For a writer that moves hundreds of jobs in one transaction (the controller, see
    `cluster.observe.writing`): one UPDATE per set of changed fields (`base.bulk_update`), one
    INSERT for the JobEvents, one head advance for the audit events, one status message per job
    (its newest state) and one usage message per team, instead of a round trip each. The writer
    passes it to what moves jobs and calls `flush()` before its transaction commits; nothing is
    written until then, so reads in between see the moved jobs only through their objects.
    A job is changed through one object only (the one its `LockedJobs` gave out).
    """

    def __init__(self) -> None:
        self._jobs: dict[int, Job] = {}
        self._fields: dict[int, set[str]] = {}
        self._events: list[JobEvent] = []
        self._audit: list[AuditEvent] = []
        self._moved_at: dict[int, str] = {}
        self._usage_teams: dict[int, Team] = {}

    def save(self, job: Job, fields: Iterable[str]) -> None:
        """Write `fields` of `job` at the flush, with the values it has then."""
        if self._jobs.setdefault(job.pk, job) is not job:
            raise RuntimeError(f"job {job.pk} changed through two different objects")
        self._fields.setdefault(job.pk, set()).update(fields)

    def audit(self, event: AuditEvent) -> None:
        """Append `event` (`audit.record.audit_event`) to the chain at the flush."""
        self._audit.append(event)

    def move(self, job: Job, fields: Iterable[str], event: JobEvent, usage_changed: bool) -> None:
        """A transition of `job` (see `transition`): its fields, its JobEvent, and whether the
        GPUs its team holds changed."""
        self.save(job, fields)
        self._events.append(event)
        self._moved_at[job.pk] = event.at.isoformat()
        if usage_changed:
            self._usage_teams.setdefault(job.team_id, job.team)

    def flush(self) -> None:
        """Write everything held (once, before the commit), the audit events last: the chain's
        head, which every submission waits for, stays locked from there to the commit only."""
        by_fields: dict[tuple[str, ...], list[Job]] = {}
        for job_id, job in self._jobs.items():
            by_fields.setdefault(tuple(sorted(self._fields[job_id])), []).append(job)
        for fields, jobs in by_fields.items():
            update_rows(jobs, fields)
        for listener in _listeners:  # before the insert, whose auto_now_add rewrites `at`
            listener(self._events)
        JobEvent.unscoped.bulk_create(self._events, batch_size=BATCH_EVENTS)
        append(self._audit)
        publish_statuses(
            [(self._jobs[job_id], at) for job_id, at in self._moved_at.items()],
            list(self._usage_teams.values()),
        )


def can_transition(job: Job, to_state: str) -> bool:
    return to_state in ALLOWED[job.state]


def transition(
    job: Job,
    to_state: str,
    reason: str,
    *,
    actor: User | None = None,
    moves: Moves | None = None,
    **changes: Any,
) -> None:
    """Move `job` to `to_state` (setting `changes` with it), saving it and its JobEvent, and
    its audit event where the move is one of `AUDITED`: here, or at the flush of `moves`.

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
        # Back in the queue: nothing of the previous attempt's placement or notice remains. A
        # preempted job keeps the job it was stopped for, and does not start before it
        # (`scheduler.JobRequest.yields_to`); it lets go when it leaves the queue.
        job.placement, job.admitted_at, job.started_at, job.k8s_name = {}, None, None, ""
        job.grace_until = None
        if from_state != State.PREEMPTED:
            job.preempted_for = None
        changed += [
            "placement",
            "admitted_at",
            "started_at",
            "k8s_name",
            "grace_until",
            "preempted_for",
        ]
    elif from_state == State.QUEUED and job.preempted_for_id is not None:
        job.preempted_for = None
        changed.append("preempted_for")
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
    unit = moves or Moves()
    unit.move(job, changed, event, usage_changed)
    if to_state in AUDITED:
        unit.audit(
            audit_event(
                AUDITED[to_state],
                actor=actor,
                team=job.team,
                target=job,
                after={"reason": job.state_reason},
            )
        )
    if moves is None:
        unit.flush()
