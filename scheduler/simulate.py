"""Discrete-event replay of a workload through the real scheduler, in simulated time.

This is the what-if engine ("what if this team had 8 more H100s?") and the benchmark harness.

When it schedules: at every instant something happens (a job arrives, ends, or reaches the end
of its preemption grace), after applying everything that happens at that instant; events closer
together than `EPSILON_S` count as one instant, so float noise in trace times does not double the
cycles. Nothing else changes the cluster, so no cycle in between could decide anything new.

To stay fast on long queues the simulator keeps one QueueIndex across cycles. Every
`explain_every`-th cycle explains (every cycle by default): each waiting job's estimated start is
kept when it is the job's first (made at its submission, if that cycle explained) and whenever
it moves by `ESTIMATE_MOVE_S` or more, as a portal user would see it change; `scheduler.metrics`
sets them against the actual starts. Decisions do not depend on whether a cycle explains.

A preempted job keeps running until its grace deadline (or its natural end, if sooner), then goes
back to the queue with its original submission time and starts over.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from scheduler.config import PolicyConfig
from scheduler.decide import decide
from scheduler.decisions import Decisions
from scheduler.fairshare import decay
from scheduler.history import RuntimeHistory
from scheduler.model import (
    JobId,
    JobRequest,
    MemberCap,
    NodeState,
    QuotaInfo,
    RunningJob,
    Snapshot,
    TeamInfo,
)
from scheduler.queue import QueueIndex

EPSILON_S = 1e-6
ESTIMATE_MOVE_S = 1.0
"""An estimate that moves less is the same estimate (the portal rewrites none that moves less)."""
Estimate = tuple[float, float]
"""(made at, estimated start)."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    request: JobRequest
    runtime_s: float
    """What the job really runs for (the scheduler only sees the request's limit)."""
    label: str = ""
    """A job class for reports (e.g. "small")."""


@dataclass(frozen=True, slots=True)
class Trace:
    jobs: tuple[TraceJob, ...]
    nodes: tuple[NodeState, ...]
    teams: tuple[TeamInfo, ...]
    quotas: tuple[QuotaInfo, ...]
    member_caps: tuple[MemberCap, ...] = ()


@dataclass(frozen=True, slots=True)
class JobOutcome:
    job_id: JobId
    team: str
    label: str
    gpus: int
    submit: float
    start: float | None
    end: float | None
    estimates: tuple[Estimate, ...]
    """Its estimated starts while it waited, first and at every change (oldest first)."""
    preempted: int
    gpu_type: str = ""


@dataclass(frozen=True, slots=True)
class SimulationResult:
    outcomes: tuple[JobOutcome, ...]
    total_gpus: int
    busy_gpu_seconds: float
    """GPU-seconds held, the work preemption threw away included."""
    lost_gpu_seconds: float
    """Of those, the runs of preempted jobs (each restarts from zero)."""
    cycles: int
    decisions: int
    scheduler_wall_s: float
    quota_violations: int


Progress = Callable[[int, int], None]
"""Told (jobs arrived so far, jobs in the trace) as a replay goes."""


def simulate(
    trace: Trace,
    config: PolicyConfig,
    *,
    explain_every: int = 1,
    learn_runtimes: bool = True,
    oracle_runtimes: bool = False,
    progress: Progress | None = None,
    progress_every: int = 1000,
) -> SimulationResult:
    """With `learn_runtimes`, jobs carry runtimes predicted from the runs that ended before
    (`scheduler.history`), as the portal's controller gives them. `oracle_runtimes` (a
    diagnosis, no scheduler has it) predicts every job's true runtime instead: what is left of
    the estimates' error is then the projection's and the later arrivals'. `progress` is told
    every `progress_every` arrivals (a what-if shows how far its replay is)."""
    simulation = _Simulation(trace, config, explain_every, learn_runtimes)
    simulation.oracle = oracle_runtimes
    simulation.progress, simulation.progress_every = progress, max(progress_every, 1)
    return simulation.run()


class _Simulation:
    def __init__(self, trace: Trace, config: PolicyConfig, explain_every: int, learn: bool) -> None:
        self.trace, self.config, self.explain_every = trace, config, max(explain_every, 1)
        self.history = RuntimeHistory() if learn else None
        self.arrivals = sorted(trace.jobs, key=lambda j: (j.request.submit_time, j.request.id))
        self.by_id = {j.request.id: j for j in trace.jobs}
        self.free = {n.name: n.free_gpus for n in trace.nodes}
        self.node_states = list(trace.nodes)
        self.limits = {(q.team, q.gpu_type): q.limit for q in trace.quotas}
        self.queue = QueueIndex()
        self.running: dict[JobId, RunningJob] = {}
        self.ends: dict[JobId, float] = {}
        self.events: list[tuple[float, int, JobId]] = []
        self.usage: dict[str, float] = {}
        self.start: dict[JobId, float] = {}
        self.finish: dict[JobId, float] = {}
        self.estimates: dict[JobId, list[Estimate]] = {}
        self.preempted: dict[JobId, int] = {}
        self.busy = self.lost = 0.0
        self.cycles = self.decisions = self.violations = 0
        self.scheduler_s = 0.0
        self._counter = 0
        self.now = self.last = self.arrivals[0].request.submit_time if self.arrivals else 0.0
        self.progress: Progress | None = None
        self.progress_every = 1000
        self.oracle = False

    def run(self) -> SimulationResult:
        next_arrival = 0
        while next_arrival < len(self.arrivals) or self.events:
            upcoming = [self.events[0][0]] if self.events else []
            if next_arrival < len(self.arrivals):
                upcoming.append(self.arrivals[next_arrival].request.submit_time)
            self._advance(min(upcoming))
            while (
                next_arrival < len(self.arrivals)
                and self.arrivals[next_arrival].request.submit_time <= self.now + EPSILON_S
            ):
                self.queue.add(self._predicted(self.arrivals[next_arrival].request))
                next_arrival += 1
                if self.progress is not None and next_arrival % self.progress_every == 0:
                    self.progress(next_arrival, len(self.arrivals))
            while self.events and self.events[0][0] <= self.now + EPSILON_S:
                _, _, job_id = heapq.heappop(self.events)
                self._end_or_stop(job_id)
            self._cycle()
        return self._result()

    def _advance(self, to: float) -> None:
        elapsed = max(0.0, to - self.now)
        held: dict[str, int] = {}
        for running in self.running.values():
            held[running.job.team] = held.get(running.job.team, 0) + running.job.gpus
        self.busy += elapsed * sum(held.values())
        half_life = self.config.fair_half_life_s
        for team in sorted(set(self.usage) | set(held)):
            self.usage[team] = decay(self.usage.get(team, 0.0), elapsed, half_life)
            self.usage[team] += held.get(team, 0) * elapsed
        self.now = max(self.now, to)

    def _end_or_stop(self, job_id: JobId) -> None:
        running = self.running.get(job_id)
        if running is None:
            return
        if self.ends[job_id] <= self.now + EPSILON_S:
            self.finish[job_id] = self.now
            if self.history is not None:
                self.history.record(running.job, self.now - running.start_time)
        elif running.grace_until is not None and running.grace_until <= self.now + EPSILON_S:
            self.preempted[job_id] = self.preempted.get(job_id, 0) + 1
            self.lost += running.job.gpus * (self.now - running.start_time)
            self.queue.add(self._predicted(replace(running.job, yields_to=running.preempted_for)))
        else:
            return
        del self.running[job_id]
        del self.ends[job_id]
        for node, gpus in running.placement:
            self.free[node] += gpus

    def _cycle(self) -> None:
        self.cycles += 1
        explain = self.queue.size > 0 and self.cycles % self.explain_every == 0
        nodes = self._nodes()
        snapshot = Snapshot(
            self.now,
            (),
            tuple(self.running.values()),
            nodes,
            self.trace.teams,
            self.trace.quotas,
            self.trace.member_caps,
            dict(self.usage),
        )
        began = time.perf_counter()
        decisions = decide(snapshot, self.queue, self.config, explain=explain)
        self.scheduler_s += time.perf_counter() - began
        self.decisions += len(decisions.admissions) + len(decisions.preemptions)
        self._apply(decisions)
        if explain:
            self._keep_estimates(decisions)

    def _keep_estimates(self, decisions: Decisions) -> None:
        for job_id, pending in decisions.pending.items():
            estimate = pending.estimated_start
            if estimate is None:
                continue
            kept = self.estimates.setdefault(job_id, [])
            if not kept or abs(kept[-1][1] - estimate) >= ESTIMATE_MOVE_S:
                kept.append((self.now, estimate))

    def _nodes(self) -> tuple[NodeState, ...]:
        """The nodes as the cluster would report them; only changed ones are rebuilt."""
        for index, node in enumerate(self.node_states):
            free = self.free[node.name]
            if node.free_gpus != free:
                self.node_states[index] = replace(node, free_gpus=free)
        return tuple(self.node_states)

    def _apply(self, decisions: Decisions) -> None:
        for job_id in decisions.released:
            victim = self.running.get(job_id)
            if victim is not None:  # its stop event finds no grace deadline and passes
                self.running[job_id] = replace(victim, grace_until=None, preempted_for=None)
        for preemption in decisions.preemptions:
            victim = self.running[preemption.job_id]
            until = max(preemption.grace_until, self.now)
            self.running[victim.job.id] = replace(
                victim, grace_until=until, preempted_for=preemption.for_job_id
            )
            heapq.heappush(self.events, (until, self._seq(), victim.job.id))
            if until <= self.now + EPSILON_S:
                self._end_or_stop(victim.job.id)
        for admission in decisions.admissions:
            trace_job = self.by_id[admission.job_id]
            restarts = self.preempted.get(admission.job_id, 0)
            job = self._predicted(replace(trace_job.request, restarts=restarts))
            self.queue.remove(job)
            self.running[job.id] = RunningJob(job, self.now, admission.placement)
            self.start.setdefault(job.id, self.now)
            end = self.now + min(trace_job.runtime_s, job.runtime_limit_s)
            self.ends[job.id] = end
            heapq.heappush(self.events, (end, self._seq(), job.id))
            for node, gpus in admission.placement:
                self.free[node] -= gpus
                self.violations += self.free[node] < 0
        if decisions.admissions:
            self.violations += self._over_limit()

    def _predicted(self, job: JobRequest) -> JobRequest:
        if self.oracle:
            runtime = min(self.by_id[job.id].runtime_s, job.runtime_limit_s)
            return replace(job, expected_runtime_s=runtime)
        return job if self.history is None else self.history.predicted(job)

    def _seq(self) -> int:
        self._counter += 1
        return self._counter

    def _over_limit(self) -> int:
        used: dict[tuple[str, str], int] = {}
        for running in self.running.values():
            key = (running.job.team, running.job.gpu_type)
            used[key] = used.get(key, 0) + running.job.gpus
        return sum(1 for key, gpus in used.items() if gpus > self.limits.get(key, 0))

    def _result(self) -> SimulationResult:
        outcomes = tuple(
            JobOutcome(
                job.request.id,
                job.request.team,
                job.label,
                job.request.gpus,
                job.request.submit_time,
                self.start.get(job.request.id),
                self.finish.get(job.request.id),
                tuple(self.estimates.get(job.request.id, ())),
                self.preempted.get(job.request.id, 0),
                job.request.gpu_type,
            )
            for job in self.arrivals
        )
        total = sum(n.total_gpus for n in self.trace.nodes)
        return SimulationResult(
            outcomes,
            total,
            self.busy,
            self.lost,
            self.cycles,
            self.decisions,
            self.scheduler_s,
            self.violations,
        )
