"""A preempted job does not start before the job it was stopped for (`JobRequest.yields_to`).

Without this, a victim put back in the queue ahead of its claimant (older, or of a team whose
share fell when it lost its GPUs) takes its GPUs back at once, and is stopped again for the same
job: two preemptions, twice the work thrown away, and the claimant no better off.
"""

from dataclasses import replace

from scheduler import JobRequest, Policy, ReasonCode, schedule
from scheduler.queue import QueueIndex
from scheduler.simulate import Trace, TraceJob, simulate
from tests.scheduler.builders import NOW, config, job, node, quota, running, snapshot

QUOTAS = [quota("alice-lab", 8, 16), quota("bob-lab", 0, 16), quota("carol-lab", 8, 16)]


def _victim(claimant: int | None, gpus: int = 8) -> JobRequest:
    """bob's job, stopped for `claimant` and queued again; submitted long before alice's."""
    return replace(job(10, "bob-lab", gpus=gpus, submit=NOW - 5000), yields_to=claimant)


def test_a_preempted_job_waits_while_its_claimant_does() -> None:
    """alice's job does not fit yet (4 GPUs free, it needs 8); bob's would, but waits."""
    queued = [_victim(1, gpus=4), job(1, "alice-lab", gpus=8, submit=NOW - 10)]
    decisions = schedule(snapshot(queued, [], [node("n1", 4)], QUOTAS), config())
    assert decisions.admissions == []
    reason = decisions.pending[10].reason
    assert reason.code is ReasonCode.YIELDING and reason.figures == {"for_job": 1}
    assert reason.message == "preempted for job 1, which starts first"


def test_the_claimant_goes_first_to_the_gpus_its_preemption_freed() -> None:
    """carol's job came before alice's in fifo order, and would take the node bob's job was
    stopped to free for alice: then the preemption would have bought alice nothing."""
    carol = job(20, "carol-lab", gpus=8, submit=NOW - 60)
    queued = [_victim(1), carol, job(1, "alice-lab", gpus=8, submit=NOW - 10)]
    decisions = schedule(snapshot(queued, [], [node("n1", 8)], QUOTAS), config(policy=Policy.FIFO))
    assert [a.job_id for a in decisions.admissions] == [1]
    assert decisions.pending[20].reason.code is ReasonCode.PRIORITY


def test_it_starts_once_its_claimant_has_left_the_queue() -> None:
    decisions = schedule(snapshot([_victim(1)], [], [node("n1", 8)], QUOTAS), config())
    assert [a.job_id for a in decisions.admissions] == [10]


def test_it_starts_beside_a_claimant_admitted_earlier_in_the_cycle() -> None:
    claimant = job(1, "alice-lab", gpus=8, submit=NOW - 10, priority=10)
    queued = [_victim(1), claimant]
    nodes = [node("n1", 8), node("n2", 8)]
    decisions = schedule(snapshot(queued, [], nodes, QUOTAS), config(policy=Policy.CAPACITY))
    assert sorted(a.job_id for a in decisions.admissions) == [1, 10]


def test_it_does_not_wait_for_a_claimant_that_can_never_start() -> None:
    """alice's quota was lowered below her job since: waiting for it would be forever."""
    quotas = [quota("alice-lab", 4, 4), quota("bob-lab", 0, 16)]
    queued = [_victim(1), job(1, "alice-lab", gpus=8, submit=NOW - 10)]
    decisions = schedule(snapshot(queued, [], [node("n1", 8)], quotas), config())
    assert [a.job_id for a in decisions.admissions] == [10]
    assert decisions.pending[1].reason.code is ReasonCode.NEVER_FITS


def test_in_a_replay_one_preemption_buys_the_claimant_its_gpus() -> None:
    """bob borrows the only node; alice's job within her guarantee reclaims it. When bob's
    grace period ends, his job (submitted first, so first under fifo) is back in the queue:
    it must let alice start there, not take the node back and be preempted again (before, it
    did, twice: then, stopped `max_preemptions` times, it ran to its end and alice waited
    10,300 s)."""
    trace = Trace(
        jobs=(
            TraceJob(job(10, "bob-lab", gpus=8, submit=0.0, limit=20_000), 5000.0),
            TraceJob(job(1, "alice-lab", gpus=8, submit=10.0, limit=5000), 100.0),
        ),
        nodes=(node("n1", 8),),
        teams=(),
        quotas=tuple(QUOTAS),
    )
    result = simulate(trace, config(policy=Policy.FIFO, preemption_grace_s=300.0))
    outcomes = {o.job_id: o for o in result.outcomes}
    assert outcomes[1].start == 310.0  # at the end of bob's grace period
    assert outcomes[10].preempted == 1
    assert outcomes[10].end == 410.0 + 5000.0  # it starts again when alice's job ends


def test_the_queue_keeps_count_of_who_yields_to_whom() -> None:
    index = QueueIndex.from_jobs([_victim(1), job(1, "alice-lab", gpus=8)])
    assert index.yielded_to == {1: 1}
    # Removed as the simulator and the controller remove it: by a request without the link.
    index.remove(job(10, "bob-lab", gpus=8, submit=NOW - 5000))
    assert index.yielded_to == {} and set(index.by_id) == {1}
    index.add(_victim(1))
    assert index.yielded_to == {1: 1} and set(index.by_id) == {1, 10}


def test_a_yielding_job_is_told_no_sooner_than_its_claimant() -> None:
    """alice's job waits for n1's 8 GPUs (free in 1,000 s); bob's 4-GPU job could have n2's
    GPUs sooner (in 100 s), but waits for alice's to start first."""
    holders = [
        running(job(30, "carol-lab", gpus=8, limit=1000.0), {"n1": 8}, started=NOW),
        running(job(31, "carol-lab", gpus=8, limit=100.0), {"n2": 8}, started=NOW),
    ]
    queued = [_victim(1, gpus=4), job(1, "alice-lab", gpus=8, nodes=2, submit=NOW - 10)]
    nodes = [node("n1", 0), node("n2", 0)]
    decisions = schedule(snapshot(queued, holders, nodes, QUOTAS), config())
    claimant, victim = decisions.pending[1], decisions.pending[10]
    assert victim.reason.code is ReasonCode.YIELDING
    assert claimant.estimated_start == NOW + 1000
    assert victim.estimated_start == NOW + 1000
    assert victim.estimated_start_range == claimant.estimated_start_range
