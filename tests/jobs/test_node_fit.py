"""A job no node of its GPU type could ever hold is refused at submission, with the figures.

What a node of each type offers comes from the inventory: syncing a node records it on its type.
"""

from __future__ import annotations

from typing import Any

import pytest

from cluster.inventory import gpu_types_by_label, sync_node
from jobs.models import Job
from quotas.models import GpuType
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db


def _node(name: str, cpu: str, memory: str, product: str = "NVIDIA-H100-80GB-HBM3") -> Any:
    resources = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": "8", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources, "conditions": []},
    }


def _sync(*nodes: Any) -> GpuType:
    for node in nodes:
        sync_node(node, gpu_types_by_label())
    return GpuType.objects.get(name="h100-80g")


def test_syncing_nodes_records_the_largest_node_of_each_type(world: World) -> None:
    h100 = _sync(_node("small", "64", "512Gi"), _node("big", "127500m", "2Ti"))
    assert (h100.node_cpu_millis, h100.node_memory_bytes) == (127_500, 2 * 1024**4)
    h100 = _sync(_node("smaller", "8", "64Gi"))  # a smaller node does not shrink the largest
    assert (h100.node_cpu_millis, h100.node_memory_bytes) == (127_500, 2 * 1024**4)
    a100 = GpuType.objects.get(name="a100-80g")
    assert (a100.node_cpu_millis, a100.node_memory_bytes) == (None, None)


@pytest.mark.parametrize(
    ("overrides", "errors"),
    [
        ({"cpu": 512}, {"cpu": ["512 requested, nodes of type h100-80g have at most 128"]}),
        (
            {"memory": "99999Pi"},
            {"memory": ["99999Pi requested, nodes of type h100-80g have at most 2Ti"]},
        ),
    ],
)
def test_it_refuses_a_job_no_node_of_its_type_can_hold(
    world: World, overrides: dict[str, Any], errors: dict[str, list[str]]
) -> None:
    _sync(_node("gpu-0", "128", "2Ti"))
    response = api_as(world.bob).post("/api/v1/jobs/", spec(**overrides), format="json")
    assert (response.status_code, response.json()) == (400, errors)
    assert Job.objects.for_user(world.admin).count() == 0


def test_it_admits_a_job_that_fills_the_largest_node(world: World) -> None:
    _sync(_node("gpu-0", "128", "2Ti"))
    body = spec(cpu=128, memory="2048Gi")
    assert api_as(world.bob).post("/api/v1/jobs/", body, format="json").status_code == 201


def test_it_does_not_guess_before_the_inventory_has_seen_a_node(world: World) -> None:
    body = spec(cpu=512, memory="99999Pi")
    assert api_as(world.bob).post("/api/v1/jobs/", body, format="json").status_code == 201
