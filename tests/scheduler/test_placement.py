"""Gang placement: all or nothing, tightest single node, one topology domain, no cordoned node."""

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


def test_it_places_a_gang_on_one_node_when_one_node_holds_it() -> None:
    nodes = [node("a", 4), node("b", 8), node("c", 4)]
    decisions = schedule(snapshot([job(1, nodes=2, gpus=4)], nodes=nodes, quotas=QUOTAS), config())
    assert placement_of(decisions, 1) == {"b": 8}


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
