"""Apply a scheduling cycle's decisions to the database, in one transaction.

Kubernetes is told afterwards (the controller creates and deletes Jobs once this commits), so a
crash in between leaves the database ahead of the cluster, which reconciliation closes: an
ADMITTED job whose Job object is missing is created again, under the same deterministic name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

from django.db import transaction

from audit.record import audit_event
from base.bulk_update import update_values
from cluster import job_notices
from cluster.observe import writing
from jobs.models import EXPLANATION_FIELDS, HOLDING_STATES, Job, State
from jobs.states import Moves, transition
from jobs.streams import publish_waiting
from scheduler import Decisions, Pending, ReasonCode

# Estimates move every cycle as time passes; rewriting thousands of rows for a few seconds'
# drift would make every cycle a bulk write. An estimate is rewritten once it moves by the
# resolution or by ESTIMATE_SHARE of the time left until it, whichever is more (ten seconds
# matter to a job due in half a minute, not to one due in an hour), and at most every
# ESTIMATE_EVERY_S or ESTIMATE_INTERVAL_SHARE of the time left, whichever is more: in a busy
# queue the estimates of jobs minutes away swing by a quarter and more from one explaining cycle
# to the next. With a fixed five seconds, the Kueue replay's overloaded queue (thousands of
# small jobs pushed back by every higher-priority arrival) rewrote them seven times per job,
# 100,000 row writes, two fifths of every explaining cycle; a job due in two minutes now sees
# its estimate refreshed every half minute, one due in twenty seconds every five.
ESTIMATE_RESOLUTION_S = 10
ESTIMATE_SHARE = 0.1
ESTIMATE_EVERY_S = 5.0
ESTIMATE_INTERVAL_SHARE = 0.25
FIGURES_EVERY_S = 15.0
WAITING_FOR_GPUS = frozenset(
    {
        ReasonCode.NO_CAPACITY,
        ReasonCode.FRAGMENTED,
        ReasonCode.PRIORITY,
        ReasonCode.GANG_WAIT,
        ReasonCode.BACKFILL_BLOCKED,
    }
)
"""Reasons that all say "waiting for GPUs to free up", worked out from the moment's free GPUs
and who is ahead: in a busy queue a job moves among them from one cycle to the next."""


Notice = tuple[str, str, datetime | None]
"""(namespace, Kubernetes Job name, deadline or None): what a job's pods are told
(`cluster.kubecalls.KubeCalls.notify_on_commit`)."""


POSITION_FIGURES = ("queue_position", "team_position")
"""Figures written beside a waiting job's reason: its place among all waiting jobs and among its
team's, in the order the policy takes them (1 first). Like the others, rewritten at most every
`Explanations.refresh_s`."""


@dataclass
class Applied:
    admitted: list[Job] = field(default_factory=list)
    deletions: list[tuple[str, str]] = field(default_factory=list)
    """(namespace, name) of Kubernetes Jobs to delete: victims whose grace period is over."""
    requeued: list[int] = field(default_factory=list)
    """Ids of those victims, back in the queue."""
    notices: list[Notice] = field(default_factory=list)
    """Preemption deadlines to put on (or, None, take off) running jobs' pods."""


def _moment(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(round(ts), UTC) if ts is not None else None


def _placement_text(placement: dict[str, int]) -> str:
    return ", ".join(f"{gpus} on {node}" for node, gpus in sorted(placement.items()))


def admit(job: Job, placement: dict[str, int], moves: Moves) -> None:
    attempts = job.attempts + 1
    transition(
        job,
        State.ADMITTED,
        f"admitted: {_placement_text(placement)}",
        moves=moves,
        placement=placement,
        attempts=attempts,
        k8s_name=f"job-{job.pk}-{attempts}",
    )
    moves.audit(
        audit_event(
            "job.admit",
            actor=None,
            team=job.team,
            target=job,
            after={"placement": placement, "attempt": attempts},
        )
    )


def stop_preempted(job: Job, reason: str, moves: Moves | None = None) -> tuple[str, str]:
    """The grace period is over: back to the queue; returns the Kubernetes Job to delete.

    Written through `moves`, or here where none is given."""
    unit = moves if moves is not None else Moves()
    before = {"state": job.state, "placement": job.placement}
    deletion = (job.team.namespace, job.k8s_name)
    transition(job, State.PREEMPTED, reason, moves=unit)
    transition(job, State.QUEUED, "requeued after preemption", moves=unit)
    unit.audit(
        audit_event(
            "job.preempt",
            actor=None,
            team=job.team,
            target=job,
            before=before,
            after={"state": job.state, "reason": reason},
        )
    )
    if moves is None:
        unit.flush()
    return deletion


def _notice(job: Job, reason: str, for_job: int, grace_until: datetime, moves: Moves) -> Notice:
    job.grace_until, job.preempted_for_id = grace_until, for_job
    job.state_reason = (
        f"preemption notice ({reason}) for job {for_job}: stops by {grace_until:%H:%M:%S}"
    )
    moves.save(job, ["grace_until", "preempted_for", "state_reason"])
    job_notices.preemption_notice(job, for_job, grace_until)
    moves.audit(
        audit_event(
            "job.preempt_notice",
            actor=None,
            team=job.team,
            target=job,
            after={"reason": reason, "for_job": for_job, "grace_until": grace_until.isoformat()},
        )
    )
    return (job.team.namespace, job.k8s_name, grace_until)


def withdraw_notice(job: Job, why: str, moves: Moves) -> Notice:
    """The job its preemption made room for no longer needs its GPUs: it runs on, and its
    owner is told."""
    grace_until = job.grace_until.isoformat() if job.grace_until else None
    before = {"for_job": job.preempted_for_id, "grace_until": grace_until}
    job_notices.notice_withdrawn(job, job.preempted_for_id)
    job.state_reason = f"preemption withdrawn: job {job.preempted_for_id} {why}"[:255]
    job.grace_until, job.preempted_for_id = None, None
    moves.save(job, ["grace_until", "preempted_for", "state_reason"])
    moves.audit(
        audit_event(
            "job.preempt_withdrawn",
            actor=None,
            team=job.team,
            target=job,
            before=before,
            after={"why": why},
        )
    )
    return (job.team.namespace, job.k8s_name, None)


@dataclass(frozen=True)
class _Written:
    code: str
    figures: dict[str, object]
    estimated_start: datetime | None
    at: float  # the controller's clock (`Explanations.clock`) at the write


@dataclass
class Explanations:
    """What the leading controller last wrote of each waiting job's reason and estimate.

    Only the leader writes these fields, so it can tell what changed without reading them
    back: a cycle writes a job whose reason changed at once, one whose estimate moved at most
    every `estimate_every_s` (or a share of the time left until it), but figures alone (jobs
    ahead, GPUs free), or a move among the ways of waiting for GPUs, at most every `refresh_s`:
    in a busy queue these change for every job all the time, and a long queue was rewritten
    whole every few seconds (twelve writes per job in the Kueue replay). A new leader starts
    empty and writes every waiting job once. Intervals are read on `clock`, the controller's.
    """

    written: dict[int, _Written] = field(default_factory=dict)
    refresh_s: float = FIGURES_EVERY_S
    estimate_every_s: float = ESTIMATE_EVERY_S
    clock: Callable[[], float] = time.monotonic

    def stale(self, job_id: int, fresh: _Written, now: datetime) -> bool:
        old = self.written.get(job_id)
        if old is None:
            return True
        if old.code != fresh.code and not {old.code, fresh.code} <= WAITING_FOR_GPUS:
            return True
        if (old.estimated_start is None) != (fresh.estimated_start is None):
            return True
        if old.estimated_start and old.estimated_start < now:  # passed: a user sees it
            return fresh.at - old.at >= self.estimate_every_s
        if old.estimated_start and fresh.estimated_start:
            drift = abs((fresh.estimated_start - old.estimated_start).total_seconds())
            left = (old.estimated_start - now).total_seconds()
            moved = drift >= max(ESTIMATE_RESOLUTION_S, ESTIMATE_SHARE * left)
            interval = max(self.estimate_every_s, ESTIMATE_INTERVAL_SHARE * left)
            if moved and fresh.at - old.at >= interval:
                return True
        changed = old.code != fresh.code or old.figures != fresh.figures
        return changed and fresh.at - old.at >= self.refresh_s

    def keep_only(self, job_ids: Iterable[int]) -> None:
        """Forget jobs that no longer wait: one queued again later is written afresh."""
        self.written = {i: self.written[i] for i in job_ids if i in self.written}


def _positions(pending: Pending) -> dict[str, int]:
    """The job's place in the queue, kept with its reason's figures (`POSITION_FIGURES`)."""
    return dict(zip(POSITION_FIGURES, (pending.position, pending.team_position), strict=True))


def _pending(decisions: dict[int, Pending], explanations: Explanations, at: datetime) -> None:
    explanations.keep_only(decisions)
    now = explanations.clock()
    changed, written = [], {}
    for job_id, pending in decisions.items():
        figures: dict[str, object] = {**pending.reason.figures, **_positions(pending)}
        fresh = _Written(pending.reason.code, figures, _moment(pending.estimated_start), now)
        if not explanations.stale(job_id, fresh, at):
            continue
        latest = pending.estimated_start_range[1] if pending.estimated_start_range else None
        changed.append(
            (
                job_id,
                fresh.code,
                pending.reason.message[:255],
                fresh.figures,
                fresh.estimated_start,
                _moment(latest),
            )
        )
        written[job_id] = fresh
    # A job cancelled since the snapshot keeps no explanation.
    update_values(Job, EXPLANATION_FIELDS, changed, where={"state": State.QUEUED})
    transaction.on_commit(partial(publish_waiting, changed))
    told = explanations.written
    job_notices.never_fits(
        [
            job_id
            for job_id, fresh in written.items()
            if fresh.code == ReasonCode.NEVER_FITS
            and (job_id not in told or told[job_id].code != ReasonCode.NEVER_FITS)
        ]
    )
    transaction.on_commit(partial(explanations.written.update, written))


def apply_decisions(
    decisions: Decisions,
    now: datetime,
    explanations: Explanations | None = None,
    *,
    holder: str,
) -> Applied:
    """Write a cycle's decisions, if `holder` still leads (else `cluster.lease.Lost`)."""
    applied = Applied()
    # One transaction; the moves, their JobEvents and audit events are written together at its
    # end (`writing`'s unit of work).
    with writing(holder) as jobs:
        jobs.lock(
            [p.job_id for p in decisions.preemptions]
            + [a.job_id for a in decisions.admissions]
            + decisions.released
        )
        for job_id in decisions.released:
            victim = jobs.get(job_id)
            if victim and victim.state in HOLDING_STATES and victim.grace_until is not None:
                why = "started elsewhere or no longer waits"
                applied.notices.append(withdraw_notice(victim, why, jobs.moves))
        for preemption in decisions.preemptions:
            victim = jobs.get(preemption.job_id)
            if victim is None or victim.state not in HOLDING_STATES:
                continue
            grace = _moment(preemption.grace_until) or now
            if grace <= now:
                reason = f"preempted ({preemption.reason}) for job {preemption.for_job_id}"
                applied.deletions.append(stop_preempted(victim, reason, jobs.moves))
                applied.requeued.append(victim.pk)
            elif victim.grace_until is None:
                for_job = preemption.for_job_id
                applied.notices.append(
                    _notice(victim, preemption.reason, for_job, grace, jobs.moves)
                )
        for admission in decisions.admissions:
            job = jobs.get(admission.job_id)
            if job is not None and job.state == State.QUEUED:  # not cancelled meanwhile
                admit(job, dict(admission.placement), jobs.moves)
                applied.admitted.append(job)
        if decisions.explained:  # otherwise the waiting jobs keep the reasons last written
            _pending(decisions.pending, explanations or Explanations(), now)
    return applied
