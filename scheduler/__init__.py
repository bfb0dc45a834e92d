"""The portal's scheduling policy as a pure function: a snapshot in, decisions out.

No Django and no I/O: only the standard library, so it can be tested exhaustively, benchmarked at
scale and replayed over traces and what-if quota changes (design section 5).

    decisions = schedule(snapshot, config)

The controller applies `decisions.preemptions` (tell victims to stop by `grace_until`), then
`decisions.admissions` (create the pods on the given nodes), and shows `decisions.pending` to
users. `simulate(trace, config)` runs a workload through the same function in simulated time.
"""

from scheduler.config import Policy, PolicyConfig
from scheduler.decide import decide, schedule
from scheduler.decisions import (
    Admission,
    Decisions,
    Pending,
    Preemption,
    PreemptionReason,
    Reason,
    ReasonCode,
)
from scheduler.model import (
    JobId,
    JobRequest,
    MemberCap,
    NodeState,
    Placement,
    QuotaInfo,
    RunningJob,
    Snapshot,
    TeamInfo,
)

__all__ = [
    "Admission",
    "Decisions",
    "JobId",
    "JobRequest",
    "MemberCap",
    "NodeState",
    "Pending",
    "Placement",
    "Policy",
    "PolicyConfig",
    "Preemption",
    "PreemptionReason",
    "QuotaInfo",
    "Reason",
    "ReasonCode",
    "RunningJob",
    "Snapshot",
    "TeamInfo",
    "decide",
    "schedule",
]
