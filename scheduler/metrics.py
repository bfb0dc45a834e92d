"""Figures of a simulated run: the numbers a replay prints and a what-if page compares.

Waits are time to (first) admission. `usage_pct` counts the GPU-seconds of runs that were not
thrown away; the work preemption threw away (a victim restarts from zero) is `lost_pct` and
`lost_gpu_s`, apart. Fairness is per team: its average wait, and its useful GPU-seconds against
its share (its guaranteed GPUs, or its weight where it has none), with Jain's index over each
(1.0 when every team waited alike, or got service in proportion to its share).

Estimate accuracy (`eta`), per job class and for all jobs: the error |estimated - actual start|
of the estimate a job got at its submission (`submit`) and of every estimate it was shown while
waiting (`change`: the first and each later one that moved), in seconds and relative to the
wait it predicted (actual start minus the moment of the estimate); waits under a second are
left out of the relative figures (a job that starts at once has no wait to be wrong about).
Each figure has its sample count; with none it is None (printed "n/a").

The same figures again for the estimates that no later arrival overtook (`*_not_overtaken`: no
job of the type submitted after the estimate was made started before the job, or with it). No
estimate can know the jobs that will arrive and go ahead; what is left for those estimates is
the error of the projection and of the runtimes it assumes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from itertools import accumulate
from statistics import mean

from scheduler.simulate import JobOutcome, SimulationResult

Summary = dict[str, float]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


ErrorFigures = dict[str, float | int | None]
MIN_WAIT_S = 1.0
"""Waits shorter than this are left out of relative estimate errors."""


def summarise(values: list[float]) -> Summary:
    if not values:
        return {"avg": 0.0, "p50": 0.0, "p99": 0.0}
    return {"avg": mean(values), "p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}


def waits_by(outcomes: Iterable[JobOutcome], attribute: str) -> dict[str, Summary]:
    grouped: dict[str, list[float]] = {}
    for outcome in outcomes:
        if outcome.start is not None:
            key = str(getattr(outcome, attribute))
            grouped.setdefault(key, []).append(outcome.start - outcome.submit)
    return {key: summarise(values) for key, values in sorted(grouped.items())}


def jain(values: Iterable[float]) -> float:
    xs = list(values)
    squares = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * squares) if squares else 1.0


def _errors(samples: list[tuple[float, float]]) -> ErrorFigures:
    """(error, wait) samples -> median and p90 of the error, in seconds and relative."""
    absolute = [error for error, _ in samples]
    relative = [error / wait for error, wait in samples if wait >= MIN_WAIT_S]
    return {
        "n": len(absolute),
        "p50_s": percentile(absolute, 0.5) if absolute else None,
        "p90_s": percentile(absolute, 0.9) if absolute else None,
        "n_relative": len(relative),
        "p50_rel": percentile(relative, 0.5) if relative else None,
        "p90_rel": percentile(relative, 0.9) if relative else None,
    }


class _Overtaking:
    """Per GPU type, the latest submission among the jobs started by a given time."""

    def __init__(self, outcomes: Iterable[JobOutcome]) -> None:
        started: dict[str, list[tuple[float, float]]] = {}
        for outcome in outcomes:
            if outcome.start is not None:
                started.setdefault(outcome.gpu_type, []).append((outcome.start, outcome.submit))
        self._starts: dict[str, list[float]] = {}
        self._latest: dict[str, list[float]] = {}
        for gpu_type, pairs in started.items():
            pairs.sort()
            self._starts[gpu_type] = [start for start, _ in pairs]
            self._latest[gpu_type] = list(accumulate((submit for _, submit in pairs), max))

    def overtaken(self, gpu_type: str, made: float, start: float) -> bool:
        """Did a job submitted after `made` start no later than `start`?"""
        index = bisect_right(self._starts.get(gpu_type, []), start + 1e-6)
        return index > 0 and self._latest[gpu_type][index - 1] > made + 1e-6


KINDS = ("submit", "change", "submit_not_overtaken", "change_not_overtaken")


def estimate_errors(outcomes: Iterable[JobOutcome]) -> dict[str, dict[str, ErrorFigures]]:
    """Per class (and "all"): the errors of estimates at submission and at every change, and
    of those that no later arrival overtook."""
    outcomes = list(outcomes)
    overtaking = _Overtaking(outcomes)
    grouped: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for outcome in outcomes:
        if outcome.start is None or not outcome.estimates:
            continue
        start = outcome.start
        samples: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
        for index, (at, estimate) in enumerate(outcome.estimates):
            sample = (abs(estimate - start), start - at)
            alone = not overtaking.overtaken(outcome.gpu_type, at, start)
            kinds = ["change"] + (["change_not_overtaken"] if alone else [])
            if index == 0 and at <= outcome.submit + 1e-6:
                kinds += ["submit"] + (["submit_not_overtaken"] if alone else [])
            for kind in kinds:
                samples[kind].append(sample)
        for label in (outcome.label or "-", "all"):
            bucket = grouped.setdefault(label, {kind: [] for kind in KINDS})
            for kind in KINDS:
                bucket[kind].extend(samples[kind])
    return {
        label: {kind: _errors(samples) for kind, samples in kinds.items()}
        for label, kinds in sorted(grouped.items())
    }


def team_fairness(outcomes: Iterable[JobOutcome], shares: Mapping[str, float]) -> dict[str, object]:
    """Each team's average wait and useful GPU-seconds against its share; Jain's index over
    the waits and over usage per share."""
    service: dict[str, float] = dict.fromkeys(shares, 0.0)
    waits: dict[str, list[float]] = {team: [] for team in shares}
    for outcome in outcomes:
        if outcome.start is not None:
            waits.setdefault(outcome.team, []).append(outcome.start - outcome.submit)
        if outcome.start is not None and outcome.end is not None:
            service[outcome.team] = service.get(outcome.team, 0.0)
            service[outcome.team] += outcome.gpus * (outcome.end - outcome.start)
    total_service = sum(service.values()) or 1.0
    total_share = sum(shares.values()) or 1.0
    teams: dict[str, dict[str, float]] = {}
    for team in sorted(service):
        share = shares.get(team, 0.0) / total_share
        used = service[team] / total_service
        teams[team] = {
            "share": share,
            "usage_share": used,
            "usage_per_share": used / share if share else 0.0,
            "avg_wait_s": mean(waits[team]) if waits.get(team) else 0.0,
        }
    active = [t for t in teams.values() if t["usage_share"] > 0]
    return {
        "teams": teams,
        "jain_usage_per_share": jain(t["usage_per_share"] for t in active),
        "jain_wait": jain(t["avg_wait_s"] for t in active),
    }


def report(result: SimulationResult, shares: Mapping[str, float]) -> dict[str, object]:
    done = [o for o in result.outcomes if o.end is not None]
    first = min((o.submit for o in result.outcomes), default=0.0)
    wall = max((o.end for o in done if o.end is not None), default=first) - first
    capacity = result.total_gpus * wall
    useful = result.busy_gpu_seconds - result.lost_gpu_seconds
    return {
        "wall_s": wall,
        "usage_pct": 100.0 * useful / capacity if capacity else 0.0,
        "lost_gpu_s": result.lost_gpu_seconds,
        "lost_pct": 100.0 * result.lost_gpu_seconds / capacity if capacity else 0.0,
        "preemptions": sum(o.preempted for o in result.outcomes),
        "most_preempted": max((o.preempted for o in result.outcomes), default=0),
        "wait_s": {
            "class": waits_by(result.outcomes, "label"),
            "team": waits_by(result.outcomes, "team"),
        },
        "avg_jct_s": mean(o.end - o.submit for o in done if o.end is not None) if done else 0.0,
        "fairness": team_fairness(result.outcomes, shares),
        "eta": estimate_errors(result.outcomes),
        "quota_violations": result.quota_violations,
        "jobs": len(result.outcomes),
        "unfinished": len(result.outcomes) - len(done),
        "cycles": result.cycles,
        "scheduler_s": result.scheduler_wall_s,
        "decisions_per_s": result.decisions / result.scheduler_wall_s
        if result.scheduler_wall_s
        else 0.0,
    }
