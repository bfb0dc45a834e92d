"""Node and GPU records kept in step with the cluster's Node objects."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import PositiveBigIntegerField, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils.dateparse import parse_datetime
from kubernetes.utils import parse_quantity

from cluster.backend import Obj
from cluster.models import Gpu, Node
from quotas.models import GpuType

# The labels real clusters carry: GPU Feature Discovery's product and NVLink clique (the GPUs one
# NVLink fabric joins), and the well-known Kubernetes zone as the coarser topology domain the
# portal calls a rack (Kubernetes defines no rack label).
PRODUCT_LABEL = "nvidia.com/gpu.product"
RACK_LABEL = "topology.kubernetes.io/zone"
NVLINK_LABEL = "nvidia.com/gpu.clique"


def node_fields(obj: Obj, gpu_types: dict[str, GpuType]) -> dict[str, Any]:
    """What the portal keeps of a Kubernetes Node object."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    labels = meta.get("labels") or {}
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    product = labels.get(PRODUCT_LABEL, "")
    return {
        "gpu_type": gpu_types.get(product),
        "product_label": product,
        "gpu_capacity": int((status.get("capacity") or {}).get("nvidia.com/gpu", 0)),
        "gpu_allocatable": int((status.get("allocatable") or {}).get("nvidia.com/gpu", 0)),
        "labels": labels,
        "rack": labels.get(RACK_LABEL, ""),
        "nvlink_domain": labels.get(NVLINK_LABEL, ""),
        "ready": ready.get("status") == "True",
        "cordoned": bool(spec.get("unschedulable")),
        "last_heartbeat": parse_datetime(ready.get("lastHeartbeatTime") or "") or None,
    }


def sync_node(obj: Obj, gpu_types: dict[str, GpuType]) -> tuple[Node, bool]:
    """Upsert one node; returns it and whether its schedulability changed."""
    fields = node_fields(obj, gpu_types)
    with transaction.atomic(savepoint=False):
        node = Node.objects.select_for_update().filter(name=obj["metadata"]["name"]).first()
        before = node.schedulable if node else None
        if node is None:
            node = Node(name=obj["metadata"]["name"])
        for key, value in fields.items():
            setattr(node, key, value)
        node.save()
        have = set(node.gpus.values_list("index", flat=True))
        Gpu.objects.bulk_create(
            [Gpu(node=node, index=i) for i in range(node.gpu_capacity) if i not in have]
        )
        _record_largest(node.gpu_type, obj)
    return node, before != node.schedulable


def _record_largest(gpu_type: GpuType | None, obj: Obj) -> None:
    """Raise the type's record of the most CPU and memory one node offers to this node's, where
    larger: submission refuses a job no node of the type could hold."""
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    if gpu_type is None or not {"cpu", "memory"} <= allocatable.keys():
        return
    cpu = int(parse_quantity(allocatable["cpu"]) * 1000)
    memory = int(parse_quantity(allocatable["memory"]))
    if (gpu_type.node_cpu_millis or 0) >= cpu and (gpu_type.node_memory_bytes or 0) >= memory:
        return
    # Typed: an untyped Value is bound as a 4-byte integer on PostgreSQL, and 2 TiB wraps to 0.
    cpu_value, memory_value = (Value(v, PositiveBigIntegerField()) for v in (cpu, memory))
    GpuType.objects.filter(pk=gpu_type.pk).update(
        node_cpu_millis=Greatest(Coalesce("node_cpu_millis", cpu_value), cpu_value),
        node_memory_bytes=Greatest(Coalesce("node_memory_bytes", memory_value), memory_value),
    )
    gpu_type.refresh_from_db(fields=["node_cpu_millis", "node_memory_bytes"])


def gpu_types_by_label() -> dict[str, GpuType]:
    return {t.product_label: t for t in GpuType.objects.all()}


def sync_nodes(objects: list[Obj]) -> list[Node]:
    """Upsert every listed node; nodes no longer listed are marked not ready (kept for history)."""
    types = gpu_types_by_label()
    nodes = [sync_node(obj, types)[0] for obj in objects]
    Node.objects.exclude(name__in=[n.name for n in nodes]).update(ready=False)
    return nodes
