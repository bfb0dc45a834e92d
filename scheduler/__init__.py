"""The portal's scheduling policy as a pure function: a snapshot in, decisions out.

No Django and no I/O: only the standard library, so it can be tested exhaustively, benchmarked at
scale and replayed over traces and what-if quota changes (design section 5).

    decisions = schedule(snapshot, config)

The controller applies `decisions.preemptions` (tell victims to stop by `grace_until`), then
`decisions.admissions` (create the pods on the given nodes), and shows `decisions.pending` to
users. `simulate(trace, config)` runs a workload through the same function in simulated time.

The production image runs this package compiled by mypyc (`make compiled` builds it here; the
same source, about 1.5 x faster a cycle: docs/decisions/0011-compiled-scheduler.md). A compiled
module shadows its source, so importing the package refuses compiled modules older than their
source: they would run code that is no longer there (the package's only I/O, at import: a look
at its own files).
"""

from pathlib import Path

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

COMPILED = not __file__.endswith((".py", ".pyc"))
"""Is this package the one mypyc compiled?"""


def _stale_builds(package: Path) -> list[str]:
    """Sources changed after their module was compiled (none where nothing is compiled)."""
    stale = []
    for built in package.glob("*.so"):
        source = package / (built.name.split(".", 1)[0] + ".py")
        if source.exists() and source.stat().st_mtime > built.stat().st_mtime:
            stale.append(source.name)
    return sorted(stale)


if _stale := _stale_builds(Path(__file__).parent):
    raise ImportError(
        f"scheduler: {', '.join(_stale)} changed after it was compiled; run `make compiled` "
        "again, or `make interpreted` to run the source"
    )
