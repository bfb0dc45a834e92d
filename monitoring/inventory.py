"""Which GPU row and which job stand behind a node's GPU index."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.core.cache import cache

from cluster.models import Gpu
from jobs.models import Job, State

GPU_MAP_SECONDS = 300
# Placements change at admission and at the end of a job; a few seconds of stale attribution
# spare every batch a query.
OWNERS_SECONDS = 5


@dataclass(frozen=True)
class JobRef:
    job_id: int
    team_id: int


def gpu_ids(node_id: int, indexes: Iterable[int]) -> dict[int, int]:
    """{index: Gpu id} for these indexes, creating rows for GPUs the inventory lacks yet."""
    wanted = set(indexes)
    key = f"monitoring.gpu-ids.{node_id}"
    known: dict[int, int] = cache.get(key) or {}
    if wanted <= known.keys():
        return known
    missing = wanted - known.keys()
    Gpu.objects.bulk_create(
        [Gpu(node_id=node_id, index=i) for i in sorted(missing)], ignore_conflicts=True
    )
    known = dict(Gpu.objects.filter(node_id=node_id).values_list("index", "id"))
    cache.set(key, known, GPU_MAP_SECONDS)
    return known


def gpu_owners(node_name: str) -> dict[int, JobRef]:
    """{GPU index: job} for the jobs running on a node, by placement.

    Job.placement says how many GPUs of a node a job holds, not which. Jobs are laid over the
    indexes in the order they started (then by id), as a first-fit device plugin hands out free
    GPUs; when an earlier job ends before a later one, the attribution can be off until the
    later job ends too. The kubelet pod-resources socket would give the exact mapping.
    """
    key = f"monitoring.gpu-owners.{node_name}"
    cached: dict[int, JobRef] | None = cache.get(key)
    if cached is not None:
        return cached
    running = (
        Job.unscoped.filter(state=State.RUNNING, placement__has_key=node_name)
        .order_by("started_at", "id")
        .values_list("id", "team_id", "placement")
    )
    owners: dict[int, JobRef] = {}
    next_index = 0
    for job_id, team_id, placement in running:
        count = int(placement.get(node_name, 0))
        for index in range(next_index, next_index + count):
            owners[index] = JobRef(job_id, team_id)
        next_index += count
    cache.set(key, owners, OWNERS_SECONDS)
    return owners
