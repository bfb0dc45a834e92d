"""Where each team stands under fair share: its weight, the share that weight entitles it to,
what it holds now and what it used lately, as the scheduler's own ledger counts them.

For the team page: a lead can see why the team's jobs go after another team's (a larger
current or decayed share for its weight), with the scheduler's formula, not a copy of it.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from scheduler.config import PolicyConfig
from scheduler.cycle import Cycle
from scheduler.model import Snapshot
from scheduler.queue import QueueIndex


@dataclass(frozen=True, slots=True)
class Standing:
    weight: float
    """Its fair-share weight, times its guaranteed GPUs where shares are weighted by them."""
    fair_share: float
    """Its weight over all teams' weights: what it is entitled to when every team wants more."""
    current: float
    """The largest fraction of any GPU type's capacity it holds now."""
    past: float
    """Its decayed past usage, as a share of what the whole cluster gives in one half-life."""
    past_gpu_hours: float
    """Its decayed past usage in GPU-hours."""
    priority: float
    """(current + past) / weight: under `fair`, the team with the lowest goes first."""
    rank: int
    """1 for the teams whose jobs go first under `fair` (teams with equal figures share one)."""


def standings(snapshot: Snapshot, config: PolicyConfig) -> dict[str, Standing]:
    """Every team's standing in `snapshot` (its queue is not looked at)."""
    ledger = Cycle(snapshot, QueueIndex(), config, explain=False).ledger
    teams = [team.name for team in snapshot.teams]
    total = sum(ledger.weight(team) for team in teams) or 1.0
    shares = sorted(ledger.share(team) for team in teams)
    return {
        team: Standing(
            weight=ledger.weight(team),
            fair_share=ledger.weight(team) / total,
            current=ledger.dominant(team),
            past=ledger.past(team),
            past_gpu_hours=snapshot.past_usage.get(team, 0.0) / 3600,
            priority=ledger.share(team),
            rank=bisect_left(shares, ledger.share(team)) + 1,
        )
        for team in teams
    }
