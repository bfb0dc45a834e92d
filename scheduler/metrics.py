"""Figures of a simulated run: the numbers a replay prints and a what-if page compares.

Waits are time to (first) admission. Usage counts every GPU-second held, including work lost to
preemption. Fairness is Jain's index over teams of GPU-seconds divided by the team's share (its
guaranteed GPUs, or its weight where it has none): 1.0 when every team got service in proportion
to its share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from statistics import mean, median

from scheduler.simulate import JobOutcome, SimulationResult

Summary = dict[str, float]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


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


def report(result: SimulationResult, shares: Mapping[str, float]) -> dict[str, object]:
    done = [o for o in result.outcomes if o.end is not None]
    first = min((o.submit for o in result.outcomes), default=0.0)
    wall = max((o.end for o in done if o.end is not None), default=first) - first
    service: dict[str, float] = dict.fromkeys(shares, 0.0)
    for outcome in done:
        if outcome.start is not None and outcome.end is not None:
            service[outcome.team] = service.get(outcome.team, 0.0)
            service[outcome.team] += outcome.gpus * (outcome.end - outcome.start)
    errors = [
        abs(o.estimate_at_submit - o.start)
        for o in result.outcomes
        if o.estimate_at_submit is not None and o.start is not None
    ]
    return {
        "wall_s": wall,
        "usage_pct": 100.0 * result.busy_gpu_seconds / (result.total_gpus * wall) if wall else 0.0,
        "wait_s": {
            "class": waits_by(result.outcomes, "label"),
            "team": waits_by(result.outcomes, "team"),
        },
        "avg_jct_s": mean(o.end - o.submit for o in done if o.end is not None) if done else 0.0,
        "jain_fairness": jain(service[t] / max(shares.get(t, 1.0), 1e-9) for t in sorted(service)),
        "eta_mae_s": median(errors) if errors else 0.0,
        "eta_samples": len(errors),
        "quota_violations": result.quota_violations,
        "jobs": len(result.outcomes),
        "unfinished": len(result.outcomes) - len(done),
        "cycles": result.cycles,
        "scheduler_s": result.scheduler_wall_s,
        "decisions_per_s": result.decisions / result.scheduler_wall_s
        if result.scheduler_wall_s
        else 0.0,
    }
