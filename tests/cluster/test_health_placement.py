"""GPUs marked unhealthy and cordoned nodes are out of the scheduler's capacity until healthy."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from cluster.models import Gpu, Node
from cluster.snapshot import build_snapshot
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from monitoring.xids import store_xids
from tests.cluster.conftest import Cluster
from tests.conftest import World, spec

ECC_DOUBLE_BIT = 48


def _fatal_xid(node: Node, index: int) -> None:
    """What the agents' endpoint stores when a node reports an ECC double-bit error."""
    gpu_ids = dict(node.gpus.values_list("index", "id"))
    store_xids(
        node.pk, node.name, gpu_ids, [{"index": index, "xid": ECC_DOUBLE_BIT, "at": time.time()}]
    )


@pytest.mark.django_db
def test_unhealthy_gpus_and_cordoned_nodes_leave_the_snapshot(world: World) -> None:
    nodes = {
        name: Node.objects.create(
            name=name, gpu_type=world.h100, gpu_capacity=8, gpu_allocatable=allocatable, ready=True
        )
        for name, allocatable in (("n1", 8), ("n2", 7), ("n3", 8))
    }
    for node in nodes.values():
        Gpu.objects.bulk_create(Gpu(node=node, index=i) for i in range(8))
    _fatal_xid(nodes["n1"], 3)
    # n2's device plugin already left the failed GPU out of allocatable: it counts once.
    _fatal_xid(nodes["n2"], 5)
    Node.objects.filter(name="n3").update(cordoned=True)
    job = submit_job(world.vision, parse_spec(spec(gpus_per_node=2)), acting_user=world.bob)
    Job.unscoped.filter(pk=job.pk).update(
        state=State.RUNNING, placement={"n1": 2}, started_at=timezone.now()
    )

    seen = {n.name: n for n in build_snapshot(timezone.now(), {}).nodes}
    assert {name: (n.total_gpus, n.free_gpus) for name, n in seen.items()} == {
        "n1": (7, 5),
        "n2": (7, 7),
        "n3": (8, 8),
    }
    assert {name: n.schedulable for name, n in seen.items()} == {
        "n1": True,
        "n2": True,
        "n3": False,
    }

    Gpu.objects.filter(node__name="n1").update(healthy=True)  # replaced and reset
    assert {n.name: n.total_gpus for n in build_snapshot(timezone.now(), {}).nodes}["n1"] == 8


@pytest.mark.django_db(transaction=True)
def test_a_node_with_an_unhealthy_gpu_gets_no_job_it_would_need_that_gpu_for(
    cluster: Cluster,
) -> None:
    cluster.drive(lambda: Gpu.objects.filter(node__gpu_type__name="h100-80g").count() == 64)
    h100 = list(Node.objects.filter(gpu_type__name="h100-80g").order_by("name"))
    healthy, failed = h100[-1], h100[:-1]
    for node in failed:
        _fatal_xid(node, 3)
    first = cluster.submit(runtime_s=3600, gpus_per_node=8)
    cluster.drive(lambda: cluster.state(first) == State.RUNNING)
    assert first.placement == {healthy.name: 8}

    second = cluster.submit(runtime_s=3600, gpus_per_node=8)
    cluster.drive(lambda: bool(Job.unscoped.get(pk=second.pk).pending_code))
    second.refresh_from_db()
    assert (second.state, second.pending_code) == (State.QUEUED, "FRAGMENTED")
    assert second.pending_figures["free"] == 49  # 7 of 8 on each failed node, none whole

    Gpu.objects.filter(node=failed[0]).update(healthy=True)
    cluster.drive(lambda: cluster.state(second) == State.RUNNING)
    assert second.placement == {failed[0].name: 8}
