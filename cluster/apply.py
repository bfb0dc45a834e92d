"""Apply a scheduling cycle's decisions to the database, in one transaction.

Kubernetes is told afterwards (the controller creates and deletes Jobs once this commits), so a
crash in between leaves the database ahead of the cluster, which reconciliation closes: an
ADMITTED job whose Job object is missing is created again, under the same deterministic name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from audit.record import record
from cluster.observe import writing
from jobs import states
from jobs.models import Job, State
from jobs.states import transition
from portal.bulk import update_rows
from scheduler import Decisions, Pending

# Rows are locked with FOR UPDATE OF the job table only: locking the joined team, queue and user
# rows too would block (and could deadlock with) every submission to those teams.

# Estimates move every cycle as time passes; rewriting thousands of rows for a few seconds'
# drift would make every cycle a bulk write.
ESTIMATE_RESOLUTION_S = 10


@dataclass
class Applied:
    admitted: list[Job] = field(default_factory=list)
    deletions: list[tuple[str, str]] = field(default_factory=list)
    """(namespace, name) of Kubernetes Jobs to delete: victims whose grace period is over."""


def _moment(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(round(ts), UTC) if ts is not None else None


def _placement_text(placement: dict[str, int]) -> str:
    return ", ".join(f"{gpus} on {node}" for node, gpus in sorted(placement.items()))


def admit(job: Job, placement: dict[str, int]) -> None:
    attempts = job.attempts + 1
    transition(
        job,
        State.ADMITTED,
        f"admitted: {_placement_text(placement)}",
        placement=placement,
        attempts=attempts,
        k8s_name=f"job-{job.pk}-{attempts}",
    )
    record(
        "job.admit",
        actor=None,
        team=job.team,
        target=job,
        after={"placement": placement, "attempt": attempts},
    )


def stop_preempted(job: Job, reason: str) -> tuple[str, str]:
    """The grace period is over: back to the queue; returns the Kubernetes Job to delete."""
    before = {"state": job.state, "placement": job.placement}
    deletion = (job.team.namespace, job.k8s_name)
    transition(job, State.PREEMPTED, reason)
    transition(job, State.QUEUED, "requeued after preemption")
    record(
        "job.preempt",
        actor=None,
        team=job.team,
        target=job,
        before=before,
        after={"state": job.state, "reason": reason},
    )
    return deletion


def _notice(job: Job, reason: str, for_job: int, grace_until: datetime) -> None:
    job.grace_until, job.preempted_for_id = grace_until, for_job
    job.state_reason = (
        f"preemption notice ({reason}) for job {for_job}: stops by {grace_until:%H:%M:%S}"
    )
    states.save(job, ["grace_until", "preempted_for", "state_reason"])
    record(
        "job.preempt_notice",
        actor=None,
        team=job.team,
        target=job,
        after={"reason": reason, "for_job": for_job, "grace_until": grace_until.isoformat()},
    )


def _pending(decisions: dict[int, Pending]) -> None:
    jobs = Job.unscoped.filter(pk__in=list(decisions), state=State.QUEUED).only(
        "id",
        "pending_code",
        "pending_message",
        "pending_figures",
        "estimated_start",
        "estimated_start_latest",
    )
    changed = []
    for job in jobs:
        pending = decisions[job.pk]
        earliest = _moment(pending.estimated_start)
        latest = (
            _moment(pending.estimated_start_range[1]) if pending.estimated_start_range else None
        )
        drift = (
            abs((earliest - job.estimated_start).total_seconds())
            if earliest and job.estimated_start
            else None
        )
        same_time = (earliest is None and job.estimated_start is None) or (
            drift is not None and drift < ESTIMATE_RESOLUTION_S
        )
        figures = dict(pending.reason.figures)
        if job.pending_code == pending.reason.code and job.pending_figures == figures and same_time:
            continue
        job.pending_code, job.pending_message = pending.reason.code, pending.reason.message[:255]
        job.pending_figures, job.estimated_start, job.estimated_start_latest = (
            figures,
            earliest,
            latest,
        )
        changed.append(job)
    update_rows(
        changed,
        [
            "pending_code",
            "pending_message",
            "pending_figures",
            "estimated_start",
            "estimated_start_latest",
        ],
    )


def apply_decisions(decisions: Decisions, now: datetime) -> Applied:
    applied = Applied()
    # One transaction; the moves, their JobEvents and audit events are written together.
    with writing() as jobs:
        jobs.lock(
            [p.job_id for p in decisions.preemptions] + [a.job_id for a in decisions.admissions]
        )
        for preemption in decisions.preemptions:
            victim = jobs.get(preemption.job_id)
            if victim is None or victim.state not in (State.ADMITTED, State.RUNNING):
                continue
            grace = _moment(preemption.grace_until) or now
            if grace <= now:
                reason = f"preempted ({preemption.reason}) for job {preemption.for_job_id}"
                applied.deletions.append(stop_preempted(victim, reason))
            elif victim.grace_until is None:
                _notice(victim, preemption.reason, preemption.for_job_id, grace)
        for admission in decisions.admissions:
            job = jobs.get(admission.job_id)
            if job is not None and job.state == State.QUEUED:  # not cancelled meanwhile
                admit(job, dict(admission.placement))
                applied.admitted.append(job)
        _pending(decisions.pending)
    return applied
