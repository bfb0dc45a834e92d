"""Estimates: never in the past, ranges ordered, learnt runtimes used where history exists.

An arrival forecast was tried and not kept (docs/decisions/0006-arrival-forecast.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

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


def test_a_member_whose_jobs_run_as_long_whatever_the_limit_is_predicted_the_mean() -> None:
    history = RuntimeHistory()
    for runtime, limit in ((300.0, 3600.0), (310.0, 7200.0), (290.0, 1800.0)):
        history.record_run("alice", "train", 1, 1, runtime, limit)
    asked = replace(job(1, member="alice", limit=7200.0), image="train")
    assert history.predict(asked) == pytest.approx(300.0)


def test_a_member_who_sizes_limits_to_the_job_is_predicted_a_share_of_the_limit() -> None:
    """Each run took half its limit: a job asking 4,000 s is expected to take 2,000 s (the
    mean runtime, 1,500 s, would be further off on every past run)."""
    history = RuntimeHistory()
    for runtime, limit in ((1000.0, 2000.0), (3000.0, 6000.0), (500.0, 1000.0)):
        history.record_run("alice", "train", 1, 1, runtime, limit)
    asked = replace(job(1, member="alice", limit=4000.0), image="train")
    assert history.predict(asked) == pytest.approx(2000.0)


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
    # Dave's node frees first and the claimant takes it (the gang needs two nodes): the
    # estimate says so, and the gang, which then also waits for the claimant's node, is told
    # the claimant's end (its limit, an hour), not bob's stop (NOW + 300).
    assert decisions.pending[2].estimated_start == NOW + 50 + 3600
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


def test_a_small_job_behind_a_gang_is_told_when_it_can_backfill() -> None:
    """The gang ahead waits for two whole nodes (NOW + 5000); a GPU frees on n2 at NOW + 100
    and the 1-GPU job behind the gang starts there, as the cycle's backfill lets it."""
    long_one = running(job(10, "bob-lab", gpus=8, limit=5050.0), {"n1": 8})
    short = running(job(11, "bob-lab", gpus=1, limit=150.0), {"n2": 1})
    rest = running(job(12, "bob-lab", gpus=7, limit=5050.0), {"n2": 7})
    state = snapshot(
        queued=[
            job(1, "carol-lab", nodes=2, gpus=8, submit=NOW - 200),
            job(2, gpus=1, limit=600.0, submit=NOW - 100),
        ],
        running_jobs=[long_one, short, rest],
        nodes=[node("n1", 0), node("n2", 0)],
        quotas=[quota("alice-lab", 8, 8), quota("bob-lab", 16, 16), quota("carol-lab", 16, 16)],
    )
    pending = schedule(state, PolicyConfig()).pending
    assert pending[1].estimated_start == NOW + 5000
    assert pending[2].estimated_start == NOW + 100
    assert pending[2].estimated_start_range is not None
    assert pending[2].estimated_start_range[1] > NOW + 5000  # latest: behind the gang, no backfill


def test_a_job_kept_off_gpus_held_for_a_reservation_is_not_told_now() -> None:
    """n1 is free but held for the gang's reservation (both nodes at NOW + 1000); the 1-GPU job
    behind would end after that, so it may not borrow them: it is not told "now"."""
    state = snapshot(
        queued=[
            job(1, "carol-lab", nodes=2, gpus=8, submit=NOW - 200),
            job(2, gpus=1, limit=7200.0, submit=NOW - 100),
        ],
        running_jobs=[running(job(10, "bob-lab", gpus=8, limit=1050.0), {"n2": 8})],
        nodes=[node("n1", 8), node("n2", 0)],
        quotas=[quota("alice-lab", 8, 8), quota("bob-lab", 8, 8), quota("carol-lab", 16, 16)],
    )
    decisions = schedule(state, PolicyConfig())
    assert decisions.admissions == []
    assert decisions.pending[1].estimated_start == NOW + 1000
    # The gang takes both nodes at NOW + 1000 until its limit: the job starts after it.
    assert decisions.pending[2].estimated_start == NOW + 1000 + 3600


def test_the_projection_keeps_each_team_under_its_limit() -> None:
    """Alice may hold one GPU: of her two jobs ahead only the first starts when a GPU frees
    (NOW + 100); bob's job behind them takes the next one (NOW + 200), not her second."""
    holders = [
        running(job(10, "dave-lab", gpus=1, limit=150.0), {"n1": 1}),
        running(job(11, "dave-lab", gpus=1, limit=250.0), {"n1": 1}),
        running(job(12, "dave-lab", gpus=6, limit=9050.0), {"n1": 6}),
    ]
    state = snapshot(
        queued=[
            job(1, submit=NOW - 300),
            job(2, submit=NOW - 200),
            job(3, "bob-lab", submit=NOW - 100),
        ],
        running_jobs=holders,
        nodes=[node("n1", 0)],
        quotas=[quota("alice-lab", 1, 1), quota("bob-lab", 1, 1), quota("dave-lab", 8, 8)],
    )
    pending = schedule(state, PolicyConfig(policy=Policy.FIFO)).pending
    assert pending[1].estimated_start == NOW + 100
    assert pending[3].estimated_start == NOW + 200
    assert pending[2].estimated_start == NOW + 100 + 3600  # when alice's first job gives it back


def test_a_running_job_is_expected_to_run_on_only_once_past_its_prediction() -> None:
    predicted = replace(job(1, limit=86_400.0), expected_runtime_s=100.0)
    halfway = running(predicted, {"n1": 1}, started=NOW - 60)
    assert halfway.end_expected(NOW) == NOW + 40  # its prediction, not twice what it has run
    overrun = running(predicted, {"n1": 1}, started=NOW - 150)
    assert overrun.end_expected(NOW) == NOW + 150  # past it: as long again as it has run


def test_a_job_over_its_quota_is_not_told_now_when_its_team_overran_a_prediction() -> None:
    """alice's running job was predicted to take 500 s and has run 1,000: it is expected to run
    as long again (`RunningJob.end_expected`), so her next job, held by her team's limit,
    starts then, not at once (it was told "now", cycle after cycle)."""
    ahead = replace(job(1, gpus=8, limit=10_000.0), expected_runtime_s=500.0)
    state = snapshot(
        queued=[job(2, gpus=8)],
        running_jobs=[running(ahead, {"n1": 8}, started=NOW - 1000)],
        nodes=[node("n1", 0), node("n2", 8)],
        quotas=[quota("alice-lab", 8, 8)],
    )
    waiting = schedule(state, PolicyConfig()).pending[2]
    assert waiting.reason.code is ReasonCode.QUOTA_EXHAUSTED
    assert waiting.estimated_start == NOW + 1000
    assert waiting.estimated_start_range == (NOW + 1000, NOW - 1000 + 10_000)
