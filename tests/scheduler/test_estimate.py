"""Estimates: never in the past, ranges ordered, learnt runtimes used where history exists.

An arrival forecast was tried and not kept (docs/decisions/0006-arrival-forecast.md)."""

from __future__ import annotations

from scheduler import PolicyConfig, schedule
from scheduler.config import Policy
from scheduler.history import RuntimeHistory
from scheduler.model import Snapshot
from tests.scheduler.builders import NOW, job, node, quota, running, snapshot


def _full_node_waiting() -> Snapshot:
    """One 8-GPU node held by bob until NOW + 1000 by limit; two jobs of alice wait behind it."""
    holder = running(job(1, "bob-lab", limit=1050.0, gpus=8), {"n1": 8}, started=NOW - 50)
    return snapshot(
        queued=[job(2, gpus=8, limit=600.0), job(3, gpus=8, limit=600.0)],
        running_jobs=[holder],
        nodes=[node("n1", 0)],
        quotas=[quota("alice-lab", 8, 8), quota("bob-lab", 8, 8)],
    )


def test_estimates_are_never_in_the_past_and_ranges_are_ordered() -> None:
    for policy in Policy:
        pending = schedule(_full_node_waiting(), PolicyConfig(policy=policy))
        assert set(pending.pending) == {2, 3}
        for waiting in pending.pending.values():
            assert waiting.estimated_start is not None and waiting.estimated_start >= NOW
            assert waiting.estimated_start_range is not None
            low, high = waiting.estimated_start_range
            assert NOW <= low <= waiting.estimated_start <= high


def test_learnt_runtimes_are_used_where_history_exists_and_the_limit_otherwise() -> None:
    history = RuntimeHistory()
    alice, bob = job(1, limit=3600.0), job(2, "bob-lab", limit=3600.0)
    for runtime in (100.0, 300.0):
        history.record(alice, runtime)
    assert history.predicted(alice).expected_runtime_s == 200.0
    assert history.predicted(bob).expected_runtime_s is None  # the limit stands
    short = job(3, limit=150.0)
    assert history.predicted(short).expected_runtime_s == 150.0  # capped by its limit


def test_the_estimate_uses_the_learnt_runtime_of_the_job_ahead() -> None:
    ahead = running(job(1, gpus=8, limit=3600.0), {"n1": 8}, started=NOW)
    learnt = RuntimeHistory()
    for runtime in (500.0, 700.0):
        learnt.record(ahead.job, runtime)
    predicted = running(learnt.predicted(ahead.job), {"n1": 8}, started=NOW)
    for holder, expected in ((ahead, NOW + 3600), (predicted, NOW + 600)):
        state = snapshot(
            queued=[job(2, gpus=8)],
            running_jobs=[holder],
            nodes=[node("n1", 0)],
            quotas=[quota("alice-lab", 16, 16)],
        )
        waiting = schedule(state, PolicyConfig()).pending[2]
        assert waiting.estimated_start == expected
        assert waiting.estimated_start_range == (expected, NOW + 3600)
