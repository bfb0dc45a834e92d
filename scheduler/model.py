"""Input of a scheduling cycle: frozen, plain values that the controller builds from its database.

Why frozen dataclasses: a cycle must be a pure function of its snapshot. Frozen inputs rule out
accidental mutation (and with it results that depend on evaluation order), and let the simulator
reuse the same objects from one cycle to the next without copying.

Job ids are ints (the portal's primary keys). Times are floats, seconds since the epoch, so the
package does not care where the clock comes from (wall time in the controller, simulated time in
`simulate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

JobId = int
Placement = tuple[tuple[str, int], ...]
"""Node name -> GPUs taken on it, sorted by node name (a tuple so decisions stay hashable)."""


@dataclass(frozen=True, slots=True)
class JobRequest:
    """A job asking for `nodes` x `gpus_per_node` GPUs of one type, all at once (a gang)."""

    id: JobId
    team: str
    member: str
    gpu_type: str
    nodes: int
    gpus_per_node: int
    submit_time: float
    runtime_limit_s: float
    priority: int = 0
    """The priority of the job's queue; higher runs first within a team."""
    preemptible: bool = True
    """The preemptible flag of the job's queue."""
    expected_runtime_s: float | None = None
    """Optional prediction (e.g. from the team's history); estimates use it, backfill never does."""
    image: str = ""
    """The container image: runtimes are learnt per member, image and size."""
    restarts: int = 0
    """Times it was stopped before and put back in the queue (`PolicyConfig.max_preemptions`)."""
    yields_to: JobId | None = None
    """The job it was last preempted for: while that job waits, this one does not start (else
    it would take back the GPUs it was stopped to free, and be preempted again)."""
    gpus: int = field(init=False, repr=False, compare=False)
    """nodes x gpus_per_node, kept: a cycle at scale asks it some 70,000 times."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", self.nodes * self.gpus_per_node)


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding GPUs. `grace_until` is set once it has been told to stop (preempted)."""

    job: JobRequest
    start_time: float
    placement: Placement
    grace_until: float | None = None
    preempted_for: JobId | None = None
    """The queued job its preemption makes room for; that job waits rather than preempting again."""

    def end_by_limit(self) -> float:
        """The pessimistic end: the runtime limit, or the grace deadline if that comes first."""
        end = self.start_time + self.job.runtime_limit_s
        return end if self.grace_until is None else min(end, self.grace_until)

    def end_expected(self, now: float | None = None) -> float:
        """The predicted end (the pessimistic one without a prediction). Given `now`, a job
        that has run past its prediction is expected to run as long again (runtimes are
        heavy-tailed: the longer a job has run, the longer it is likely to go on)."""
        expected = self.job.expected_runtime_s
        if expected is None:
            return self.end_by_limit()
        if now is not None and now - self.start_time >= expected:
            expected = 2 * (now - self.start_time)
        return min(self.start_time + expected, self.end_by_limit())


@dataclass(frozen=True, slots=True)
class NodeState:
    """A GPU node as the cluster reports it; `free_gpus` is authoritative."""

    name: str
    gpu_type: str
    total_gpus: int
    free_gpus: int
    labels: Mapping[str, str] = field(default_factory=dict)
    """Topology labels, e.g. {"rack": "r1", "nvlink_domain": "nv3"} (keys in PolicyConfig)."""
    cordoned: bool = False
    ready: bool = True
    installed_gpus: int | None = None
    """GPUs the node has, healthy or not (default `total_gpus`): a job too large for this
    never fits, one too large only while a GPU is unhealthy waits for its repair."""

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.cordoned

    @property
    def size(self) -> int:
        return self.installed_gpus if self.installed_gpus is not None else self.total_gpus


@dataclass(frozen=True, slots=True)
class TeamInfo:
    """A tenant; teams with the same `department` may borrow each other's idle guarantee."""

    name: str
    department: str | None = None
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class QuotaInfo:
    """GPUs of one type a team owns (`guaranteed`) and may hold at most, borrowing (`limit`)."""

    team: str
    gpu_type: str
    guaranteed: int
    limit: int


@dataclass(frozen=True, slots=True)
class MemberCap:
    """The most GPUs (all types together) one member may hold at once in one team."""

    team: str
    member: str
    max_gpus: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one cycle looks at. A team without a QuotaInfo for a type may not use it."""

    now: float
    queued: tuple[JobRequest, ...]
    running: tuple[RunningJob, ...]
    nodes: tuple[NodeState, ...]
    teams: tuple[TeamInfo, ...]
    quotas: tuple[QuotaInfo, ...]
    member_caps: tuple[MemberCap, ...] = ()
    past_usage: Mapping[str, float] = field(default_factory=dict)
    """Team -> GPU-seconds used, already decayed with `PolicyConfig.fair_half_life_s`."""
    holds: Mapping[str, Mapping[str, int | float | str]] = field(default_factory=dict)
    """Team -> figures, for teams whose waiting jobs must not start (a budget spent, with its
    hard stop): they wait with BUDGET_EXHAUSTED and those figures; running jobs are untouched."""
