"""A job that can never start as things are says so, with the figures, and takes nothing."""

from dataclasses import replace

import pytest

from scheduler import MemberCap, ReasonCode, schedule
from tests.scheduler.builders import config, job, node, quota, snapshot

NODES = [node("n1", 8), node("n2", 8), node("n3", 0, cordoned=True)]
QUOTAS = [quota("alice-lab", 16, 32)]


@pytest.mark.parametrize(
    ("request_", "figures"),
    [
        (
            {"nodes": 4, "gpus": 1},
            {"field": "nodes", "requested": 4, "limit": 3, "limit_by": "node count"},
        ),
        (
            {"gpus": 16},
            {"field": "gpus_per_node", "requested": 16, "limit": 8, "limit_by": "node size"},
        ),
        (
            {"nodes": 3, "gpus": 8, "limit": 60},
            {"field": "gpus", "requested": 24, "limit": 16, "limit_by": "member cap"},
        ),
    ],
)
def test_a_job_that_can_never_start_says_so_with_the_figures(
    request_: dict[str, int], figures: dict[str, object]
) -> None:
    caps = [MemberCap("alice-lab", "alice-lab-owner", 16)]
    snap = snapshot([job(1, **request_)], [], NODES, QUOTAS, caps=caps)  # type: ignore[arg-type]
    decisions = schedule(snap, config())
    pending = decisions.pending[1]
    assert pending.reason.code is ReasonCode.NEVER_FITS
    assert {**pending.reason.figures, "gpu_type": None} == {**figures, "gpu_type": None}
    assert (pending.estimated_start, pending.estimated_start_range) == (None, None)
    assert decisions.admissions == [] and decisions.preemptions == []
    assert "can never start" in pending.reason.message


def test_a_job_above_its_team_limit_never_fits_and_is_not_ahead_of_others() -> None:
    queued = [job(1, gpus=8, nodes=2, submit=0.0), job(2, gpus=8, submit=1.0)]
    decisions = schedule(
        snapshot(queued, [], [node("n1", 0), node("n2", 0)], [quota("alice-lab", 4, 12)]),
        config(),
    )
    assert decisions.pending[1].reason.figures["limit_by"] == "team quota"
    assert decisions.pending[1].reason.figures["limit"] == 12
    assert decisions.pending[2].reason.code is not ReasonCode.NEVER_FITS
    assert decisions.pending[2].reason.figures.get("jobs_ahead", 0) == 0


def test_an_unhealthy_gpu_is_no_reason_to_never_fit() -> None:
    repaired_soon = replace(node("n1", 7, total=7), installed_gpus=8)
    decisions = schedule(snapshot([job(1, gpus=8)], [], [repaired_soon], QUOTAS), config())
    assert decisions.pending[1].reason.code is not ReasonCode.NEVER_FITS
