"""A preemption notice is withdrawn when the job it makes room for no longer needs the GPUs."""

from dataclasses import replace

from scheduler import schedule
from scheduler.simulate import Trace, TraceJob, simulate
from tests.scheduler.builders import NOW, config, job, node, quota, running, snapshot

QUOTAS = [quota("alice-lab", 8, 16), quota("bob-lab", 8, 16)]


def _stopping_for(claimant: int) -> list:
    bob = running(job(10, "bob-lab", gpus=8, limit=86_400), {"n1": 8})
    bob_own = running(job(11, "bob-lab", gpus=8, limit=86_400), {"n2": 8})
    return [replace(bob, grace_until=NOW + 60, preempted_for=claimant), bob_own]


def test_victims_of_a_job_that_no_longer_waits_are_released() -> None:
    decisions = schedule(
        snapshot([], _stopping_for(1), [node("n1", 0), node("n2", 0)], QUOTAS), config()
    )
    assert decisions.released == [10]
    assert decisions.preemptions == []


def test_victims_of_a_claimant_that_starts_on_free_gpus_are_released() -> None:
    nodes = [node("n1", 0), node("n2", 0), node("n3", 8)]
    decisions = schedule(
        snapshot([job(1, "alice-lab", gpus=8)], _stopping_for(1), nodes, QUOTAS), config()
    )
    assert [(a.job_id, a.placement) for a in decisions.admissions] == [(1, (("n3", 8),))]
    assert decisions.released == [10]


def test_victims_stay_told_while_their_claimant_still_needs_them() -> None:
    nodes = [node("n1", 0), node("n2", 0)]
    decisions = schedule(
        snapshot([job(1, "alice-lab", gpus=8)], _stopping_for(1), nodes, QUOTAS), config()
    )
    assert decisions.admissions == [] and decisions.released == []
    assert decisions.pending[1].reason.code == "PREEMPTING"


def test_in_a_replay_a_cancelled_claim_leaves_its_victim_to_finish() -> None:
    """alice's job is preempted for, then bob's own job ends first and alice starts there: the
    victim (runs 1000 s) is not stopped and ends by itself, never requeued."""
    trace = Trace(
        jobs=(
            TraceJob(job(10, "bob-lab", gpus=8, submit=0.0, limit=5000), 1000.0),
            TraceJob(job(11, "bob-lab", gpus=8, submit=0.0, limit=5000), 30.0),
            TraceJob(job(1, "alice-lab", gpus=8, submit=10.0, limit=5000), 100.0),
        ),
        nodes=(node("n1", 8), node("n2", 8)),
        teams=(),
        quotas=(quota("alice-lab", 8, 16), quota("bob-lab", 0, 16)),
    )
    result = simulate(trace, config(preemption_grace_s=300.0))
    outcomes = {o.job_id: o for o in result.outcomes}
    assert outcomes[1].start == 30.0
    assert result.decisions == 4  # three admissions and the preemption of job 10
    assert outcomes[10].preempted == 0 and outcomes[10].end == 1000.0
