"""What each node's GPUs are doing: allocated to jobs, free, unhealthy, or held back.

The figures are the scheduler's (`cluster.snapshot`): a GPU is in use from the moment a job is
admitted onto the node, and free only on a node it may place on, so the nodes page and the admin
dashboard say what the next scheduling cycle will see.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from cluster.models import Node
from cluster.snapshot import usable_gpus
from jobs.models import HOLDING_STATES, Job


@dataclass(frozen=True)
class Occupancy:
    """One node's GPUs, counted the scheduler's way."""

    node: Node
    installed: int
    in_use: int
    unhealthy: int
    free: int

    @property
    def held_back(self) -> int:
        """Healthy GPUs neither in use nor free: on a cordoned or NotReady node, a node of no
        known GPU type, or left out of allocatable by the device plugin."""
        return max(0, self.installed - self.unhealthy - self.in_use - self.free)


def gpus_in_use() -> dict[str, int]:
    """{node name: GPUs allocated to its admitted and running jobs}."""
    used: dict[str, int] = defaultdict(int)
    holding = Job.unscoped.filter(state__in=HOLDING_STATES).order_by()
    placements = holding.values_list("placement", flat=True)
    for placement in placements:
        for node, gpus in placement.items():
            used[node] += int(gpus)
    return used


def occupancy(nodes: QuerySet[Node]) -> list[Occupancy]:
    """Each node's figures, in the queryset's order: two queries whatever the cluster's size."""
    counted = nodes.annotate(unhealthy_gpus=Count("gpus", filter=Q(gpus__healthy=False)))
    used = gpus_in_use()
    return [_of(node, used.get(node.name, 0)) for node in counted]


def _of(node: Node, in_use: int) -> Occupancy:
    installed = max(node.gpu_capacity, node.gpu_allocatable)
    unhealthy: int = node.unhealthy_gpus  # type: ignore[attr-defined]
    usable = usable_gpus(node.gpu_capacity, node.gpu_allocatable, unhealthy)
    # The scheduler places only on nodes of a known GPU type (`snapshot._nodes`).
    placeable = node.schedulable and node.gpu_type_id is not None
    free = max(0, usable - in_use) if placeable else 0
    return Occupancy(node, installed, in_use, min(unhealthy, installed), free)
