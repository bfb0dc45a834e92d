"""Which rules breach on which subjects now: plain data in, plain data out.

A rule applies to the subjects its scope covers; of several rules of one metric covering a
subject, the most specific scope wins (a team's own pending-time rule replaces the cluster's
for that team's jobs; a node's replaces its GPU type's).

Only the values past the loosest threshold of a metric's rules are looked at (`reach`): a
value short of every threshold breaches none of them, whichever rule applies to it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from monitoring.alerts.figures import Figures, Past, Reading, Values, Where

SPECIFICITY = {"cluster": 0, "gpu_type": 1, "team": 2, "node": 3, "job": 4}


@dataclass(frozen=True, slots=True)
class RuleView:
    id: int
    metric: str
    scope: str
    scope_value: str
    below: bool
    warning: float | None
    critical: float | None


@dataclass(frozen=True, slots=True)
class Breach:
    level: str
    value: float
    where: Where


def covers(rule: RuleView, where: Where) -> bool:
    scope, value = rule.scope, rule.scope_value
    if scope == "cluster":
        return True
    if scope == "gpu_type":
        return where.gpu_type == value
    if scope == "node":
        return where.node == value
    if scope == "team":
        return where.team == value
    return where.job_id is not None and str(where.job_id) == value


def level_of(rule: RuleView, value: float) -> str | None:
    def past(threshold: float | None) -> bool:
        if threshold is None:
            return False
        return value <= threshold if rule.below else value >= threshold

    if past(rule.critical):
        return "critical"
    if past(rule.warning):
        return "warning"
    return None


def reach(rules: list[RuleView]) -> Past:
    """The values any of these rules could find past a threshold."""
    above = [t for r in rules if not r.below for t in (r.warning, r.critical) if t is not None]
    below = [t for r in rules if r.below for t in (r.warning, r.critical) if t is not None]
    return Past(min(above, default=math.inf), max(below, default=-math.inf))


def breaches(rules: list[RuleView], figures: Reading | Figures) -> dict[tuple[int, str], Breach]:
    """{(rule id, subject): breach} of every rule past a threshold on a subject it applies to."""
    reading = figures if isinstance(figures, Reading) else Reading(figures)
    by_metric: dict[str, list[RuleView]] = defaultdict(list)
    for rule in rules:
        by_metric[rule.metric].append(rule)
    found: dict[tuple[int, str], Breach] = {}
    for metric, metric_rules in by_metric.items():
        values = reading.values(metric, reach(metric_rules))
        if len(metric_rules) == 1 and metric_rules[0].scope == "cluster":
            _check_one(metric_rules[0], values, found)  # the common case, without the ranking
            continue
        for subject, (value, where) in values.items():
            applying = [r for r in metric_rules if covers(r, where)]
            if not applying:
                continue
            best = max(SPECIFICITY[r.scope] for r in applying)
            for rule in applying:
                if SPECIFICITY[rule.scope] == best and (level := level_of(rule, value)):
                    found[rule.id, subject] = Breach(level, value, where)
    return found


def _check_one(rule: RuleView, values: Values, found: dict[tuple[int, str], Breach]) -> None:
    for subject, (value, where) in values.items():
        if level := level_of(rule, value):
            found[rule.id, subject] = Breach(level, value, where)
