"""Policy configuration: the knobs a platform admin (or a what-if question) may turn.

One frozen value so that a cycle, a replay and a what-if run are reproducible from their inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Policy(StrEnum):
    FIFO = "fifo"
    """Global submission order within queue priority."""
    FAIR = "fair"
    """Lowest weighted dominant share (current plus decayed past usage) first."""
    CAPACITY = "capacity"
    """Work within guaranteed quota first, then borrowing."""


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    policy: Policy = Policy.FAIR
    fair_half_life_s: float = 7 * 24 * 3600.0
    """Half-life of past usage (as Slurm's PriorityDecayHalfLife)."""
    weight_by_guarantee: bool = True
    """Under `fair`, a team's weight is its `TeamInfo.weight` times its guaranteed GPUs (all
    types; at least 1): shares are measured against what a team owns, so the team with the
    largest guarantee does not wait longest."""
    borrow_across_departments: bool = True
    """Beyond its department's idle guarantee, may a team borrow idle GPUs anywhere?"""
    reclaim: bool = True
    """May a job within its team's guarantee preempt borrowers?"""
    priority_preemption: bool = True
    """May a higher queue preempt a lower, preemptible queue of the same team?"""
    preemption_grace_s: float = 300.0
    """Time a victim gets to stop; a preemption is only made if waiting is slower than this."""
    max_preemptions: int = 2
    """A job stopped this many times already is not preempted again: each restart throws its
    work away, and a replay saw one job preempted 215 times."""
    starvation_after_s: float | None = 24 * 3600.0
    """A job waiting this long goes ahead of every younger job (aging); None disables it."""
    max_reservations: int = 64
    """Blocked jobs per GPU type that backfill protects (as Slurm's bf_max_job_test)."""
    topology_keys: tuple[str, ...] = ("nvlink_domain", "rack")
    """Node labels naming topology domains, narrowest first; a gang prefers one domain."""
