"""A small cluster written straight into the database, for the pages that count its GPUs.

h100-a: 8 GPUs, ready; gpu7 unhealthy (Xid 79); a running job holds 4, an admitted one 2.
h100-b: 8 GPUs, ready but cordoned; nothing on it.
h100-c: 8 GPUs, NotReady since its last heartbeat; nothing on it.
a100-a: 8 GPUs, ready; a running job holds 3.
Besides: a queued job (no placement) and a finished one whose placement is stale: neither holds
a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from cluster.models import Gpu, Node
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from quotas.models import GpuType, Quota
from tests.conftest import World, spec

HEARTBEAT = timezone.make_aware(datetime(2026, 3, 1, 12, 0))


@dataclass
class Scripted:
    nodes: dict[str, Node]
    running: Job


def _node(name: str, gpu_type: GpuType, **fields: object) -> Node:
    values: dict[str, object] = {"ready": True, "last_heartbeat": HEARTBEAT, **fields}
    node = Node.objects.create(
        name=name,
        gpu_type=gpu_type,
        product_label=gpu_type.product_label,
        gpu_capacity=8,
        gpu_allocatable=8,
        **values,
    )
    Gpu.objects.bulk_create([Gpu(node=node, index=i) for i in range(8)])
    return node


def _job(world: World, gpu_type: str, gpus: int, state: State, placement: dict[str, int]) -> Job:
    job = submit_job(
        world.vision,
        parse_spec(spec(gpu_type=gpu_type, gpus_per_node=gpus)),
        acting_user=world.bob,
    )
    Job.unscoped.filter(pk=job.pk).update(state=state, placement=placement)
    job.refresh_from_db()
    return job


def scripted_cluster(world: World) -> Scripted:
    Quota.objects.create(team=world.research, gpu_type=world.a100, guaranteed=8, limit=8)
    Quota.objects.create(team=world.vision, gpu_type=world.a100, guaranteed=8, limit=8)
    nodes = {
        "h100-a": _node("h100-a", world.h100),
        "h100-b": _node("h100-b", world.h100, cordoned=True, cordon_reason="disk swap"),
        "h100-c": _node("h100-c", world.h100, ready=False),
        "a100-a": _node("a100-a", world.a100),
    }
    Gpu.objects.filter(node=nodes["h100-a"], index=7).update(healthy=False, last_xid=79)
    running = _job(world, "h100-80g", 4, State.RUNNING, {"h100-a": 4})
    _job(world, "h100-80g", 2, State.ADMITTED, {"h100-a": 2})
    _job(world, "a100-80g", 3, State.RUNNING, {"a100-a": 3})
    _job(world, "h100-80g", 1, State.QUEUED, {})
    _job(world, "h100-80g", 8, State.SUCCEEDED, {"h100-b": 8})
    return Scripted(nodes, running)


def more_nodes(world: World, count: int) -> None:
    """Nodes beyond the scripted ones, each with a job on it: a page's queries must not grow."""
    for i in range(count):
        node = _node(f"h100-extra-{i}", world.h100, last_heartbeat=HEARTBEAT - timedelta(hours=i))
        _job(world, "h100-80g", 1, State.RUNNING, {node.name: 1})
