"""Output of a scheduling cycle: what to start where, what to stop, and why the rest waits.

Reasons are machine-readable (a code and a dict of figures) so pages, the API and the CLI can
render or translate them; `message` is the English rendering, built on demand because a cycle
explains thousands of jobs and most messages are never read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.model import JobId, Placement

Figure = int | float | str


class ReasonCode(StrEnum):
    QUOTA_EXHAUSTED = "QUOTA_EXHAUSTED"
    MEMBER_CAP = "MEMBER_CAP"
    NO_CAPACITY = "NO_CAPACITY"
    FRAGMENTED = "FRAGMENTED"
    PRIORITY = "PRIORITY"
    GANG_WAIT = "GANG_WAIT"
    ALL_NODES_CORDONED = "ALL_NODES_CORDONED"
    BACKFILL_BLOCKED = "BACKFILL_BLOCKED"
    PREEMPTING = "PREEMPTING"
    """Victims were told to stop for this job; it starts when their grace period ends."""
    NEVER_FITS = "NEVER_FITS"
    """The job asks for more than its quota, its owner's cap or the cluster's nodes allow: it
    cannot start until that setting changes. `limit_by` names the setting (`fits.LIMITS`)."""
    YIELDING = "YIELDING"
    """Preempted for a job that still waits: it does not start before that job (figure
    `for_job`), so as not to take back the GPUs its preemption freed."""
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    """The team has spent its month's budget and its budget stops new jobs (`Snapshot.holds`):
    none of its jobs starts until the budget is raised or the month ends. Figures: `spent`,
    `budget`, `currency`."""


_TEMPLATES: Mapping[ReasonCode, str] = {
    ReasonCode.QUOTA_EXHAUSTED: "{scope} uses {used} of limit {limit} {gpu_type}",
    ReasonCode.MEMBER_CAP: "{member} holds {used} of cap {cap} GPUs in team {team}",
    ReasonCode.NO_CAPACITY: "{requested} {gpu_type} GPUs requested, {free} free",
    ReasonCode.FRAGMENTED: "{free} GPUs free but no node with {gpus_per_node} free",
    ReasonCode.PRIORITY: "{jobs_ahead} jobs ahead",
    ReasonCode.GANG_WAIT: (
        "{nodes_available} of {nodes} nodes with {gpus_per_node} free GPUs; a gang starts whole"
    ),
    ReasonCode.ALL_NODES_CORDONED: "all {nodes} {gpu_type} nodes are cordoned or not ready",
    ReasonCode.BACKFILL_BLOCKED: "would delay job {blocked_job}, reserved to start in {wait_s} s",
    ReasonCode.PREEMPTING: "waiting for {victims} preempted jobs to stop within {wait_s} s",
    ReasonCode.NEVER_FITS: "can never start as things are: {field} {requested} requested, "
    "{limit_by} allows {limit}",
    ReasonCode.YIELDING: "preempted for job {for_job}, which starts first",
    ReasonCode.BUDGET_EXHAUSTED: "team budget used up: {spent} of {budget} {currency} spent "
    "this month",
}


@dataclass(frozen=True, slots=True)
class Reason:
    code: ReasonCode
    figures: Mapping[str, Figure] = field(default_factory=dict)

    @property
    def message(self) -> str:
        return _TEMPLATES[self.code].format(**self.figures)


@dataclass(frozen=True, slots=True)
class Admission:
    job_id: JobId
    placement: Placement


class PreemptionReason(StrEnum):
    RECLAIM = "reclaim"
    """The owner of the guarantee this job borrows needs it back."""
    PRIORITY = "priority"
    """A higher queue of the same team needs the GPUs."""


@dataclass(frozen=True, slots=True)
class Preemption:
    job_id: JobId
    reason: PreemptionReason
    for_job_id: JobId
    grace_until: float


@dataclass(frozen=True, slots=True)
class Pending:
    reason: Reason
    estimated_start: float | None
    """None when the job cannot start as things are (no schedulable node, request too large)."""
    estimated_start_range: tuple[float, float] | None
    position: int = 0
    """1-based place among all waiting jobs, in the order the policy takes them (0: unknown)."""
    team_position: int = 0
    """1-based place among its team's waiting jobs, in the same order."""


@dataclass(frozen=True, slots=True)
class Decisions:
    """Apply preemptions before admissions: with a zero grace an admission uses victims' GPUs."""

    admissions: list[Admission]
    preemptions: list[Preemption]
    pending: dict[JobId, Pending]
    """Every waiting job's reason and estimate; empty where the cycle did not explain."""
    explained: bool = True
    released: list[JobId] = field(default_factory=list)
    """Victims whose notice is withdrawn: the job they were stopping for no longer waits (it
    started without their GPUs, ended or was cancelled). They run on as if never told."""
