"""Quota what-if: a window of real submissions replayed through the scheduler twice, as things
are and with the asked changes, the two sets of figures side by side.

Plain data in, plain data out (no database here): `cluster.whatif_run` reads the jobs, nodes
and policy tables and keeps the row's progress; `cluster.whatif_request` checks what is asked.

What the replay takes as given, and why:

- The jobs are those submitted in the window, arriving when they were submitted. A job runs for
  what it really ran (finished minus started) where it ran and ended; else (waiting or running
  still) for its runtime limit, cut at the window's end, as far as anyone knows yet. A job that
  ended without starting (cancelled while it waited) asked nothing of the cluster and is left
  out; where it was cancelled because it waited too long, the replay counts it as never sent.
- The cluster starts empty at the window's first submission and runs until every job that can
  start has ended, so a wait is measured even where it ends after the window.
- The cluster is the nodes as built (their installed GPUs): the cordons and faults of this
  minute say nothing about the past weeks, and a what-if is about capacity.
- Sweeps' `max_parallel` and budget holds are not replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from scheduler import JobRequest, NodeState, PolicyConfig, QuotaInfo
from scheduler.metrics import percentile
from scheduler.simulate import JobOutcome, SimulationResult, Trace, TraceJob, simulate

SCENARIOS = ("current", "changed")
ADDED_NODE_PREFIX = "what-if"
NO_EXPLANATIONS = 2**62
"""`explain_every` for the replays: decisions do not depend on explaining, and the figures need
no estimated starts, which cost most of a cycle on a long queue."""

Figures = dict[str, float | int]
Progress = Callable[[int], None]
"""Told the percent done (0-100)."""


@dataclass(frozen=True, slots=True)
class SubmittedJob:
    """A real submission as the replay reads it; times in seconds since the epoch."""

    id: int
    team: str
    member: str
    gpu_type: str
    nodes: int
    gpus_per_node: int
    image: str
    submitted: float
    started: float | None
    finished: float | None
    runtime_limit_s: float
    priority: int
    preemptible: bool


def runtime(job: SubmittedJob, window_end: float) -> float | None:
    """What the job runs for in the replay, or None where it never ran (module docstring)."""
    if job.finished is not None:
        return None if job.started is None else max(0.0, job.finished - job.started)
    begun = job.submitted if job.started is None else job.started
    return max(0.0, min(job.runtime_limit_s, window_end - begun))


def trace_jobs(jobs: Iterable[SubmittedJob], window_end: float) -> tuple[TraceJob, ...]:
    """The replay's jobs, labelled with their GPU type (the per-type figures group by it)."""
    traced = []
    for job in jobs:
        runs = runtime(job, window_end)
        if runs is None:
            continue
        request = JobRequest(
            id=job.id,
            team=job.team,
            member=job.member,
            gpu_type=job.gpu_type,
            nodes=job.nodes,
            gpus_per_node=job.gpus_per_node,
            submit_time=job.submitted,
            runtime_limit_s=job.runtime_limit_s,
            priority=job.priority,
            preemptible=job.preemptible,
            image=job.image,
        )
        traced.append(TraceJob(request, runs, job.gpu_type))
    return tuple(traced)


def resize(
    nodes: tuple[NodeState, ...], deltas: Mapping[str, int], node_sizes: Mapping[str, int]
) -> tuple[NodeState, ...]:
    """The cluster with whole nodes of a type added (a positive delta of GPUs, in nodes of
    `node_sizes[type]` GPUs, in a rack of their own) or taken away (a negative one: the last
    nodes of the type by name, until at least that many GPUs are gone)."""
    kept = list(nodes)
    for gpu_type, delta in sorted(deltas.items()):
        if delta < 0:
            of_type = sorted((n for n in kept if n.gpu_type == gpu_type), key=lambda n: n.name)
            removed = 0
            while of_type and removed < -delta:
                node = of_type.pop()
                kept.remove(node)
                removed += node.size
        for index in range(delta // node_sizes[gpu_type] if delta > 0 else 0):
            size = node_sizes[gpu_type]
            name = f"{ADDED_NODE_PREFIX}-{gpu_type}-{index}"
            labels = {"rack": f"{ADDED_NODE_PREFIX}-{gpu_type}", "nvlink_domain": name}
            kept.append(NodeState(name, gpu_type, size, size, labels))
    return tuple(kept)


def with_quotas(
    quotas: tuple[QuotaInfo, ...], changes: Iterable[QuotaInfo]
) -> tuple[QuotaInfo, ...]:
    """`quotas` with each change in place of the team's quota of that type (or added)."""
    table = {(q.team, q.gpu_type): q for q in quotas}
    for change in changes:
        table[change.team, change.gpu_type] = change
    return tuple(table.values())


def _gpu_hours_in(outcome: JobOutcome, window: tuple[float, float]) -> float:
    """GPU-hours the job held inside the window (a job preempted in the replay counts from
    its first start: the outcome keeps no more)."""
    if outcome.start is None:
        return 0.0
    end = outcome.end if outcome.end is not None else window[1]
    held = min(end, window[1]) - max(outcome.start, window[0])
    return max(0.0, held) * outcome.gpus / 3600


def _group(outcomes: list[JobOutcome], window: tuple[float, float]) -> Figures:
    waits = [o.start - o.submit for o in outcomes if o.start is not None]
    return {
        "jobs": len(outcomes),
        "never_started": len(outcomes) - len(waits),
        "wait_p50_s": percentile(waits, 0.5),
        "wait_p90_s": percentile(waits, 0.9),
        "gpu_hours": sum(_gpu_hours_in(o, window) for o in outcomes),
    }


def _usage_pct(gpu_hours: float, gpus: int, window: tuple[float, float]) -> float:
    capacity = gpus * (window[1] - window[0]) / 3600
    return 100.0 * gpu_hours / capacity if capacity > 0 else 0.0


def figures(
    trace: Trace, result: SimulationResult, window: tuple[float, float]
) -> dict[str, dict[str, Figures]]:
    """Per team and per GPU type: jobs, jobs that never started, wait p50/p90 (seconds, of
    those that started), GPU-hours held inside the window; per type and for the cluster, its
    GPUs and their use inside the window in percent."""
    by_team: dict[str, list[JobOutcome]] = {}
    by_type: dict[str, list[JobOutcome]] = {node.gpu_type: [] for node in trace.nodes}
    for outcome in result.outcomes:
        by_team.setdefault(outcome.team, []).append(outcome)
        by_type.setdefault(outcome.label, []).append(outcome)
    gpus: dict[str, int] = dict.fromkeys(by_type, 0)
    for node in trace.nodes:
        gpus[node.gpu_type] += node.size
    types = {}
    for gpu_type, outcomes in sorted(by_type.items()):
        group = _group(outcomes, window)
        group["gpus"] = gpus[gpu_type]
        group["usage_pct"] = _usage_pct(float(group["gpu_hours"]), gpus[gpu_type], window)
        types[gpu_type] = group
    total = sum(gpus.values())
    used = sum(float(t["gpu_hours"]) for t in types.values())
    cluster: Figures = {
        "gpus": total,
        "gpu_hours": used,
        "usage_pct": _usage_pct(used, total, window),
    }
    return {
        "teams": {team: _group(outcomes, window) for team, outcomes in sorted(by_team.items())},
        "gpu_types": types,
        "cluster": {"all": cluster},
    }


def side_by_side(
    current: dict[str, dict[str, Figures]], changed: dict[str, dict[str, Figures]]
) -> dict[str, dict[str, dict[str, Figures]]]:
    """{section: {name: {"current": figures, "changed": figures}}}; a name only one scenario
    has (a GPU type whose every node is taken away) gets empty figures in the other."""
    joined: dict[str, dict[str, dict[str, Figures]]] = {}
    for section in current:
        names = sorted(set(current[section]) | set(changed[section]))
        joined[section] = {
            name: {
                "current": current[section].get(name, {}),
                "changed": changed[section].get(name, {}),
            }
            for name in names
        }
    return joined


REPLAY_SHARE = 45
"""Of the progress bar, each of the two replays' part (the first 10 are reading the window)."""


def compare(
    trace: Trace,
    changed: Trace,
    config: PolicyConfig,
    window: tuple[float, float],
    progress: Progress,
) -> dict[str, dict[str, dict[str, Figures]]]:
    """Replay both traces under `config` and set their figures side by side; `progress` is
    told after each replay."""
    results = {}
    for done, (name, scenario) in enumerate(zip(SCENARIOS, (trace, changed), strict=True), 1):
        base = 10 + REPLAY_SHARE * (done - 1)

        def told(arrived: int, total: int, base: int = base) -> None:
            progress(base + REPLAY_SHARE * arrived // max(total, 1))

        replayed = simulate(
            scenario, config, explain_every=NO_EXPLANATIONS, progress=told, progress_every=500
        )
        results[name] = figures(scenario, replayed, window)
        progress(10 + REPLAY_SHARE * done)
    return side_by_side(results["current"], results["changed"])


def changed_trace(
    trace: Trace,
    quotas: Iterable[QuotaInfo],
    gpus: Mapping[str, int],
    node_sizes: Mapping[str, int],
) -> Trace:
    """`trace` with the asked quota changes and GPUs added or taken away."""
    return replace(
        trace,
        nodes=resize(trace.nodes, gpus, node_sizes),
        quotas=with_quotas(trace.quotas, quotas),
    )
