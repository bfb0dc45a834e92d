"""Preemption: reclaim of lent guarantee, priority within a team, and what is never preempted."""

from scheduler import PreemptionReason, ReasonCode, schedule
from tests.scheduler.builders import NOW, config, job, node, quota, running, snapshot

QUOTAS = [quota("alice-lab", 8, 16), quota("bob-lab", 8, 16)]
FULL = [node("n1", 0), node("n2", 0)]


def test_a_team_within_its_guarantee_reclaims_from_a_borrower() -> None:
    bob_old = running(job(10, "bob-lab", gpus=8, limit=86_400), {"n1": 8}, started=NOW - 5000)
    bob_new = running(job(11, "bob-lab", gpus=8, limit=86_400), {"n2": 8}, started=NOW - 100)
    snap = snapshot([job(1, "alice-lab", gpus=8)], [bob_old, bob_new], FULL, QUOTAS)
    decisions = schedule(snap, config(preemption_grace_s=120.0))
    assert len(decisions.preemptions) == 1
    victim = decisions.preemptions[0]
    assert (victim.job_id, victim.reason, victim.for_job_id) == (11, PreemptionReason.RECLAIM, 1)
    assert victim.grace_until == NOW + 120.0
    pending = decisions.pending[1]
    assert pending.reason.code is ReasonCode.PREEMPTING
    assert pending.reason.figures == {"victims": 1, "wait_s": 120}
    assert pending.estimated_start == NOW + 120.0


def test_with_no_grace_the_reclaiming_job_starts_in_the_same_cycle() -> None:
    bob = [
        running(job(10, "bob-lab", gpus=8, limit=86_400), {"n1": 8}),
        running(job(11, "bob-lab", gpus=8, limit=86_400), {"n2": 8}),
    ]
    decisions = schedule(
        snapshot([job(1, "alice-lab", gpus=8)], bob, FULL, QUOTAS), config(preemption_grace_s=0.0)
    )
    assert [p.job_id for p in decisions.preemptions] == [10]
    assert [(a.job_id, a.placement) for a in decisions.admissions] == [(1, (("n1", 8),))]


def test_it_never_preempts_a_non_preemptible_job_within_its_owners_guarantee() -> None:
    # bob borrows 8 GPUs, but with one job that also holds bob's whole guarantee
    gang = job(10, "bob-lab", nodes=2, gpus=8, limit=86_400, preemptible=False)
    bob = [running(gang, {"n1": 8, "n2": 8})]
    decisions = schedule(snapshot([job(1, "alice-lab", gpus=8)], bob, FULL, QUOTAS), config())
    assert decisions.preemptions == []
    preemptible = [running(job(10, "bob-lab", nodes=2, gpus=8, limit=86_400), {"n1": 8, "n2": 8})]
    decisions = schedule(
        snapshot([job(1, "alice-lab", gpus=8)], preemptible, FULL, QUOTAS), config()
    )
    assert [p.job_id for p in decisions.preemptions] == [10]


def test_it_does_not_preempt_when_the_job_would_still_not_fit() -> None:
    bob = [running(job(10, "bob-lab", gpus=16, limit=86_400), {"n1": 8, "n2": 8})]
    quotas = [quota("alice-lab", 24, 24), quota("bob-lab", 8, 16)]
    decisions = schedule(
        snapshot([job(1, "alice-lab", nodes=3, gpus=8)], bob, FULL, quotas), config()
    )
    assert decisions.preemptions == []


def test_it_does_not_preempt_jobs_that_end_within_the_grace_period_anyway() -> None:
    bob = [
        running(job(10, "bob-lab", gpus=8, limit=200), {"n1": 8}, started=NOW - 100),
        running(job(11, "bob-lab", gpus=8, limit=200), {"n2": 8}, started=NOW - 100),
    ]
    decisions = schedule(
        snapshot([job(1, "alice-lab", gpus=8)], bob, FULL, QUOTAS), config(preemption_grace_s=300.0)
    )
    assert decisions.preemptions == []
    assert decisions.pending[1].estimated_start == NOW + 100


def test_a_higher_queue_preempts_a_lower_preemptible_queue_of_the_same_team() -> None:
    low = running(job(10, "alice-lab", gpus=8, limit=86_400, priority=1), {"n1": 8})
    protected = running(
        job(11, "alice-lab", gpus=8, limit=86_400, priority=1, preemptible=False), {"n2": 8}
    )
    urgent = job(1, "alice-lab", gpus=8, priority=10)
    decisions = schedule(snapshot([urgent], [low, protected], FULL, QUOTAS), config())
    assert [(p.job_id, p.reason) for p in decisions.preemptions] == [
        (10, PreemptionReason.PRIORITY)
    ]


def test_a_job_waiting_for_its_victims_does_not_preempt_again() -> None:
    stopping = running(job(11, "bob-lab", gpus=8, limit=86_400), {"n2": 8})
    from dataclasses import replace

    stopping = replace(stopping, grace_until=NOW + 60, preempted_for=1)
    bob = running(job(10, "bob-lab", gpus=8, limit=86_400), {"n1": 8})
    decisions = schedule(
        snapshot([job(1, "alice-lab", gpus=8)], [bob, stopping], FULL, QUOTAS), config()
    )
    assert decisions.preemptions == []
    assert decisions.pending[1].reason.code is ReasonCode.PREEMPTING
    assert decisions.pending[1].estimated_start == NOW + 60


def test_it_preempts_the_most_recently_started_borrower_first() -> None:
    bob = [
        running(job(10, "bob-lab", gpus=8, limit=86_400), {"n1": 8}, started=NOW - 10),
        running(job(11, "bob-lab", gpus=8, limit=86_400), {"n2": 8}, started=NOW - 9000),
    ]
    decisions = schedule(snapshot([job(1, "alice-lab", gpus=8)], bob, FULL, QUOTAS), config())
    assert [p.job_id for p in decisions.preemptions] == [10]


def test_it_never_preempts_an_aged_job_that_would_go_first_when_requeued() -> None:
    # Requeued, a job past the aging threshold would outrank its preemptor and take the GPUs back.
    aged = job(10, "alice-lab", gpus=8, limit=86_400, submit=NOW - 200_000)
    young = job(11, "alice-lab", gpus=8, limit=86_400)
    urgent = job(1, "alice-lab", gpus=8, priority=10)
    holding = [running(aged, {"n1": 8}), running(young, {"n2": 8})]
    decisions = schedule(
        snapshot([urgent], holding, FULL, QUOTAS), config(starvation_after_s=86_400.0)
    )
    assert [p.job_id for p in decisions.preemptions] == [11]
