"""Estimates: never in the past, ranges ordered, learnt runtimes used where history exists.

An arrival forecast was tried and not kept (docs/decisions/0006-arrival-forecast.md)."""

from __future__ import annotations

from dataclasses import replace

from scheduler import PolicyConfig, ReasonCode, schedule
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


def _claimant_behind_a_gang(dave_runs_s: float, now: float = NOW) -> Snapshot:
    """Alice reclaims bob's borrowed node (n2) for job 1, behind carol's 2-node gang (job 2);
    dave's job on n3 is expected to end `dave_runs_s` after it started (its limit is a day)."""
    bob_old = running(job(10, "bob-lab", gpus=8, limit=86_400), {"n1": 8}, started=NOW - 5000)
    bob_new = running(job(11, "bob-lab", gpus=8, limit=86_400), {"n2": 8}, started=NOW - 100)
    dave = replace(job(12, "dave-lab", gpus=8, limit=86_400), expected_runtime_s=dave_runs_s)
    return snapshot(
        queued=[
            job(2, "carol-lab", nodes=2, gpus=8, submit=NOW - 200),
            job(1, "alice-lab", gpus=8, submit=NOW - 100),
        ],
        running_jobs=[bob_old, bob_new, running(dave, {"n3": 8}, started=NOW - 50)],
        nodes=[node("n1", 0), node("n2", 0), node("n3", 0)],
        quotas=[
            quota("alice-lab", 8, 16),
            quota("bob-lab", 8, 16),
            quota("carol-lab", 16, 16),
            quota("dave-lab", 8, 8),
        ],
        now=now,
    )


NO_RESERVATIONS = PolicyConfig(max_reservations=0, preemption_grace_s=300.0)
"""Carol's gang reserves nothing, so it takes no GPU before both its nodes are free."""


def test_a_claimant_is_told_when_gpus_free_elsewhere_if_sooner_than_the_grace_deadline() -> None:
    decisions = schedule(_claimant_behind_a_gang(dave_runs_s=100.0), NO_RESERVATIONS)
    assert [(p.job_id, p.for_job_id) for p in decisions.preemptions] == [(11, 1)]
    claimant = decisions.pending[1]
    assert claimant.reason.code is ReasonCode.PREEMPTING
    # The projection puts it behind the gang (both start when bob's job stops, NOW + 300), but
    # dave's node frees first and the claimant takes it: the estimate says so.
    assert decisions.pending[2].estimated_start == NOW + 300
    assert claimant.estimated_start == NOW + 50
    assert claimant.estimated_start_range == (NOW + 50, NOW + 300)

    # And so it goes: once dave's job has ended, the claimant starts there.
    later = _claimant_behind_a_gang(dave_runs_s=100.0, now=NOW + 50)
    stopping = replace(later.running[1], grace_until=NOW + 300, preempted_for=1)
    later = replace(
        later, running=(later.running[0], stopping), nodes=(*later.nodes[:2], node("n3", 8))
    )
    decisions = schedule(later, NO_RESERVATIONS)
    assert [(a.job_id, a.placement) for a in decisions.admissions] == [(1, (("n3", 8),))]
    assert decisions.released == [11]  # bob's job is no longer needed


def test_a_claimant_is_told_the_grace_deadline_when_nothing_frees_sooner() -> None:
    decisions = schedule(_claimant_behind_a_gang(dave_runs_s=1000.0), NO_RESERVATIONS)
    claimant = decisions.pending[1]
    assert claimant.reason.code is ReasonCode.PREEMPTING
    assert claimant.estimated_start == NOW + 300
    assert claimant.estimated_start_range == (NOW + 300, NOW + 300)
