"""Usage segments opened and closed by the jobs' own moves (`jobs.states.on_flush`).

A segment opens when a job is admitted and closes when it leaves the states that hold GPUs,
in the transaction that moves the job: a move is written once (the state machine refuses a
second), so its segment is too, whichever controller made it and however often it restarts.
A flush costs one SELECT of the open segments it closes, one UPDATE for them and one INSERT
for the new ones, whatever the number of jobs; a flush that closes some adds their GPU time to
the daily roll-up (`UsageDay`) with one more statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from base.bulk_update import update_rows
from billing.models import CreditReason, UsageSegment
from billing.rollup import add_to_days
from jobs.models import HOLDING_STATES, JobEvent, State

CLOSE_FIELDS = (
    "ended_at",
    "end_state",
    "end_reason",
    "gpu_seconds",
    "credited",
    "credit_reason",
)
MICROSECONDS = Decimal(1_000_000)


def seconds_between(start: datetime, end: datetime) -> Decimal:
    """Exact seconds from `start` to `end` (never negative)."""
    delta = max(end - start, timedelta(0))
    return Decimal(delta.days * 86400 + delta.seconds) + delta.microseconds / MICROSECONDS


def credit_for(to_state: str, reason: str) -> str:
    """The credit a segment ended by this move earns ("" for none): time the platform lost."""
    if to_state == State.NODE_FAILED:
        return CreditReason.NODE_LOST
    if to_state == State.PREEMPTED:
        return CreditReason.PREEMPTED
    if to_state == State.FAILED and "xid" in reason.lower():
        return CreditReason.XID
    return ""


def _close(segment: UsageSegment, event: JobEvent) -> None:
    credit = credit_for(event.to_state, event.reason)
    segment.ended_at = event.at
    segment.end_state = event.to_state
    segment.end_reason = event.reason
    segment.gpu_seconds = segment.gpus * seconds_between(segment.started_at, event.at)
    segment.credited, segment.credit_reason = bool(credit), credit


def _open(event: JobEvent, attempt: int) -> UsageSegment:
    job = event.job
    return UsageSegment(
        team_id=job.team_id,
        job_id=job.pk,
        user_id=job.owner_id,
        queue_id=job.queue_id,
        gpu_type_id=job.gpu_type_id,
        gpus=job.total_gpus,
        attempt=attempt,
        started_at=event.at,
    )


def record_moves(events: Sequence[JobEvent]) -> None:
    """Open a segment for every admission and close one for every release among `events`."""
    releasing = {
        e.job.pk
        for e in events
        if e.from_state in HOLDING_STATES and e.to_state not in HOLDING_STATES
    }
    if not releasing and not any(e.to_state == State.ADMITTED for e in events):
        return
    open_now: dict[int, UsageSegment] = {}
    if releasing:
        stored = UsageSegment.unscoped.filter(job_id__in=releasing, ended_at__isnull=True)
        open_now = {segment.job_id: segment for segment in stored}
    closed: list[UsageSegment] = []
    opened: list[UsageSegment] = []
    admissions_left = {e.job.pk: 0 for e in events}
    for event in events:
        if event.to_state == State.ADMITTED:
            admissions_left[event.job.pk] += 1
    for event in events:
        job_id = event.job.pk
        if event.to_state == State.ADMITTED:
            # The job object is as the flush left it: its attempt is that of its last admission
            # (0 for a job admitted without counting attempts).
            admissions_left[job_id] -= 1
            attempt = max(event.job.attempts - admissions_left[job_id], 0)
            open_now[job_id] = _open(event, attempt)
            opened.append(open_now[job_id])
        elif event.from_state in HOLDING_STATES and event.to_state not in HOLDING_STATES:
            segment = open_now.pop(job_id, None)
            if segment is None:
                continue  # admitted before segments were kept: nothing to close
            _close(segment, event)
            if segment.pk is not None:
                closed.append(segment)
    update_rows(closed, CLOSE_FIELDS)
    UsageSegment.unscoped.bulk_create(opened)
    add_to_days([*closed, *opened])  # an admission and its release in one flush: closed too
