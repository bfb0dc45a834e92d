"""Gang placement: all or nothing, one pod per node, tightest nodes, one topology domain, no
cordoned node."""

import pytest

from scheduler import NodeState, ReasonCode, schedule
from tests.scheduler.builders import GPU, config, job, node, quota, snapshot

QUOTAS = [quota("alice-lab", 64, 64)]


def placement_of(decisions: object, job_id: int) -> dict[str, int]:
    for admission in decisions.admissions:  # type: ignore[attr-defined]
        if admission.job_id == job_id:
            return dict(admission.placement)
    raise AssertionError(f"job {job_id} not admitted")


def test_it_puts_a_job_on_the_tightest_node_that_fits() -> None:
    nodes = [node("a", 8), node("b", 5), node("c", 4)]
    decisions = schedule(snapshot([job(1, gpus=4)], nodes=nodes, quotas=QUOTAS), config())
    assert placement_of(decisions, 1) == {"c": 4}


def test_it_keeps_whole_nodes_whole_for_large_jobs() -> None:
    nodes = [node("a", 8), node("b", 8), node("c", 3)]
    queued = [job(1, gpus=2, submit=1.0), job(2, gpus=8, submit=2.0), job(3, gpus=8, submit=3.0)]
    decisions = schedule(snapshot(queued, nodes=nodes, quotas=QUOTAS), config())
    assert placement_of(decisions, 1) == {"c": 2}
    assert sorted(a.job_id for a in decisions.admissions) == [1, 2, 3]


def test_it_never_puts_two_pods_of_a_gang_on_one_node() -> None:
    # One node could hold the whole job, but its Job's pods may not share a node (the manifest's
    # anti-affinity): placed there, the second pod would wait for the first to end.
    nodes = [node("a", 4), node("b", 8), node("c", 4)]
    decisions = schedule(snapshot([job(1, nodes=2, gpus=4)], nodes=nodes, quotas=QUOTAS), config())
    assert placement_of(decisions, 1) == {"a": 4, "c": 4}


@pytest.mark.parametrize(("nodes", "gpus"), [(2, 2), (2, 8), (4, 1), (3, 4)])
def test_a_gang_takes_one_pod_on_each_of_distinct_nodes(nodes: int, gpus: int) -> None:
    pool = [node(f"n{i}", 8) for i in range(4)]
    decisions = schedule(
        snapshot([job(1, nodes=nodes, gpus=gpus)], nodes=pool, quotas=QUOTAS), config()
    )
    assert list(placement_of(decisions, 1).values()) == [gpus] * nodes


def test_a_gang_waits_when_fewer_nodes_than_pods_have_room() -> None:
    # 8 GPUs are free, but on two nodes: a gang of four single-GPU pods needs four nodes.
    nodes = [node("a", 4), node("b", 4), node("c", 0), node("d", 0)]
    decisions = schedule(snapshot([job(1, nodes=4, gpus=1)], nodes=nodes, quotas=QUOTAS), config())
    assert decisions.admissions == []
    reason = decisions.pending[1].reason
    assert reason.code is ReasonCode.GANG_WAIT
    assert (reason.figures["nodes_available"], reason.figures["nodes"]) == (2, 4)


def test_a_gang_prefers_partly_used_nodes_to_whole_ones() -> None:
    nodes = [node("a", 8), node("b", 2), node("c", 8), node("d", 3)]
    decisions = schedule(snapshot([job(1, nodes=2, gpus=2)], nodes=nodes, quotas=QUOTAS), config())
    assert placement_of(decisions, 1) == {"b": 2, "d": 2}


def test_it_places_a_gang_within_one_rack_when_it_can() -> None:
    nodes = [
        node("a", 8, rack="r1"),
        node("b", 8, rack="r2"),
        node("c", 8, rack="r2"),
        node("d", 4, rack="r1"),
    ]
    decisions = schedule(snapshot([job(1, nodes=2, gpus=8)], nodes=nodes, quotas=QUOTAS), config())
    assert placement_of(decisions, 1) == {"b": 8, "c": 8}


def test_it_spans_racks_only_when_no_rack_holds_the_gang() -> None:
    nodes = [node("a", 8, rack="r1"), node("b", 8, rack="r2"), node("c", 8, rack="r3")]
    decisions = schedule(snapshot([job(1, nodes=3, gpus=8)], nodes=nodes, quotas=QUOTAS), config())
    assert placement_of(decisions, 1) == {"a": 8, "b": 8, "c": 8}


def test_it_admits_a_gang_all_or_nothing() -> None:
    nodes = [node("a", 8), node("b", 8), node("c", 4)]
    decisions = schedule(snapshot([job(1, nodes=3, gpus=8)], nodes=nodes, quotas=QUOTAS), config())
    assert decisions.admissions == []
    reason = decisions.pending[1].reason
    assert reason.code is ReasonCode.GANG_WAIT
    assert (reason.figures["nodes_available"], reason.figures["nodes"]) == (2, 3)


def test_it_never_places_on_cordoned_or_unready_nodes() -> None:
    nodes = [
        node("a", 8, cordoned=True),
        node("b", 8, ready=False),
        node("c", 2),
    ]
    decisions = schedule(
        snapshot([job(1, gpus=4), job(2, gpus=2)], nodes=nodes, quotas=QUOTAS), config()
    )
    assert placement_of(decisions, 2) == {"c": 2}
    assert 1 in decisions.pending


def test_it_only_uses_nodes_of_the_requested_gpu_type() -> None:
    nodes = [NodeState("a100-node", "a100-40g", 8, 8), node("h100-node", 4)]
    decisions = schedule(snapshot([job(1, gpus=8)], nodes=nodes, quotas=QUOTAS), config())
    assert decisions.admissions == []
    assert decisions.pending[1].reason.figures["gpu_type"] == GPU
