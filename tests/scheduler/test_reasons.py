"""Every waiting job carries a reason code with figures, a message and an estimated start."""

from scheduler import ReasonCode, schedule
from tests.scheduler.builders import GPU, NOW, config, job, node, quota, running, snapshot

QUOTAS = [quota("alice-lab", 64, 64), quota("bob-lab", 64, 64)]


def test_no_capacity_names_requested_and_free_gpus() -> None:
    busy = running(job(9, "bob-lab", gpus=6, limit=1000), {"n1": 6}, started=NOW - 400)
    decisions = schedule(snapshot([job(1, gpus=4)], [busy], [node("n1", 2)], QUOTAS), config())
    reason = decisions.pending[1].reason
    assert reason.code is ReasonCode.NO_CAPACITY
    assert reason.figures == {"gpu_type": GPU, "free": 2, "requested": 4}
    assert reason.message == "4 h100-80g GPUs requested, 2 free"
    assert decisions.pending[1].estimated_start == NOW + 600
    assert decisions.pending[1].estimated_start_range == (NOW + 600, NOW + 600)


def test_fragmented_says_free_gpus_but_no_node_with_enough() -> None:
    nodes = [node(f"n{i}", 3) for i in range(8)]
    decisions = schedule(snapshot([job(1, gpus=8)], nodes=nodes, quotas=QUOTAS), config())
    reason = decisions.pending[1].reason
    assert reason.code is ReasonCode.FRAGMENTED
    assert reason.figures["free"] == 24
    assert reason.figures["gpus_per_node"] == 8
    assert reason.message == "24 GPUs free but no node with 8 free"
    assert decisions.pending[1].estimated_start is None  # nothing running would free a node


def test_priority_counts_the_jobs_ahead_that_took_the_capacity() -> None:
    queued = [job(i, gpus=2, submit=NOW - 100 + i) for i in range(1, 5)] + [
        job(5, gpus=2, submit=NOW)
    ]
    decisions = schedule(snapshot(queued, nodes=[node("n1", 8)], quotas=QUOTAS), config())
    reason = decisions.pending[5].reason
    assert reason.code is ReasonCode.PRIORITY
    assert reason.figures == {"jobs_ahead": 4}
    assert reason.message == "4 jobs ahead"
    assert decisions.pending[5].estimated_start == NOW + 3600


def test_all_nodes_cordoned_when_no_node_of_the_type_is_schedulable() -> None:
    nodes = [node("n1", 8, cordoned=True), node("n2", 8, ready=False)]
    decisions = schedule(snapshot([job(1)], nodes=nodes, quotas=QUOTAS), config())
    pending = decisions.pending[1]
    assert pending.reason.code is ReasonCode.ALL_NODES_CORDONED
    assert pending.reason.figures == {"gpu_type": GPU, "nodes": 2}
    assert pending.reason.message == "all 2 h100-80g nodes are cordoned or not ready"
    assert pending.estimated_start is None


def test_gang_wait_says_how_many_nodes_are_ready_for_the_gang() -> None:
    nodes = [node("n1", 8), node("n2", 8), node("n3", 0)]
    decisions = schedule(snapshot([job(1, nodes=3, gpus=8)], nodes=nodes, quotas=QUOTAS), config())
    reason = decisions.pending[1].reason
    assert reason.code is ReasonCode.GANG_WAIT
    assert reason.message == "2 of 3 nodes with 8 free GPUs; a gang starts whole"


def test_quota_wait_is_estimated_from_the_teams_own_running_jobs() -> None:
    mine = running(job(9, gpus=8, limit=1000), {"n1": 8}, started=NOW - 100)
    quotas = [quota("alice-lab", 8, 8)]
    decisions = schedule(
        snapshot([job(1, gpus=8)], [mine], [node("n1", 0), node("n2", 8)], quotas), config()
    )
    pending = decisions.pending[1]
    assert pending.reason.code is ReasonCode.QUOTA_EXHAUSTED
    assert pending.estimated_start == NOW + 900


def test_an_expected_runtime_narrows_the_estimate_below_the_limit() -> None:
    from dataclasses import replace

    predicted = replace(job(9, "bob-lab", gpus=8, limit=3600), expected_runtime_s=600)
    busy = running(predicted, {"n1": 8}, started=NOW - 100)
    decisions = schedule(snapshot([job(1, gpus=8)], [busy], [node("n1", 0)], QUOTAS), config())
    pending = decisions.pending[1]
    assert pending.estimated_start == NOW + 500
    assert pending.estimated_start_range == (NOW + 500, NOW + 3500)


def test_every_queued_job_is_either_admitted_or_explained() -> None:
    queued = [job(i, "alice-lab" if i % 2 else "bob-lab", gpus=1 + i % 8) for i in range(30)]
    decisions = schedule(
        snapshot(queued, nodes=[node(f"n{i}", 8) for i in range(4)], quotas=QUOTAS), config()
    )
    admitted = {a.job_id for a in decisions.admissions}
    assert admitted.isdisjoint(decisions.pending)
    assert admitted | set(decisions.pending) == set(range(30))
