"""A team's fair-share standing, as the team page shows it, is the scheduler's own ledger."""

from __future__ import annotations

import pytest

from scheduler import PolicyConfig, TeamInfo
from scheduler.standing import standings
from tests.scheduler.builders import job, node, quota, running, snapshot

HALF_LIFE_S = 3600.0


def test_weights_follow_guarantees_and_the_lowest_priority_figure_ranks_first() -> None:
    held = running(job(1, "alice-lab", gpus=4), {"n1": 4})
    snap = snapshot(
        running_jobs=[held],
        nodes=[node("n1", 4), node("n2", 8)],
        quotas=[quota("alice-lab", 12, 16), quota("bob-lab", 4, 16)],
        teams=[TeamInfo("alice-lab"), TeamInfo("bob-lab")],
        past_usage={"bob-lab": 16 * HALF_LIFE_S / 2},  # half the cluster for a half-life
    )
    figures = standings(snap, PolicyConfig(fair_half_life_s=HALF_LIFE_S))
    alice, bob = figures["alice-lab"], figures["bob-lab"]
    assert (alice.weight, bob.weight) == (12.0, 4.0)
    assert (alice.fair_share, bob.fair_share) == (0.75, 0.25)
    assert (alice.current, bob.current) == (0.25, 0.0)  # 4 of 16 GPUs
    assert bob.past == pytest.approx(0.5) and bob.past_gpu_hours == pytest.approx(8.0)
    assert alice.priority == pytest.approx(0.25 / 12)
    assert bob.priority == pytest.approx(0.5 / 4)
    assert (alice.rank, bob.rank) == (1, 2)


def test_without_weighting_by_guarantee_every_team_weighs_its_own_weight() -> None:
    snap = snapshot(
        nodes=[node("n1", 8)],
        quotas=[quota("alice-lab", 6, 8), quota("bob-lab", 2, 8)],
        teams=[TeamInfo("alice-lab", weight=3.0), TeamInfo("bob-lab")],
    )
    figures = standings(snap, PolicyConfig(weight_by_guarantee=False))
    assert figures["alice-lab"].fair_share == 0.75
    assert figures["bob-lab"].weight == 1.0
