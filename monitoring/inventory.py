"""Which GPU row and which job stand behind a node's GPU index."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache

from cluster.manifests import job_of_pod
from cluster.models import Gpu
from jobs.models import Job, State
from tenants.models import Team

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
    later job ends too. Agents that read the kubelet's pod-resources socket say exactly which
    pod holds each GPU; `batch_owners` prefers that.
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


def pod_owners(pods: Iterable[str]) -> dict[str, JobRef]:
    """{"namespace/pod": job} for pods of running portal jobs, checked against the job's team
    namespace and current attempt (a pod of another team's namespace claims nothing)."""
    wanted: dict[str, tuple[int, str, str]] = {}
    for pod in set(pods):
        namespace, _, name = pod.partition("/")
        if (owner := job_of_pod(name)) is not None:
            wanted[pod] = (owner[0], owner[1], namespace)
    keys = {pod: f"monitoring.pod-owner.{pod}" for pod in wanted}
    cached = cache.get_many(list(keys.values()))
    found = {pod: cached[key] for pod, key in keys.items() if key in cached}
    missing = {pod: wanted[pod] for pod in wanted.keys() - found.keys()}
    if missing:
        rows = Job.unscoped.filter(
            pk__in={job_id for job_id, _, _ in missing.values()}, state=State.RUNNING
        ).values_list("id", "team_id", "team__slug", "k8s_name")
        jobs = {row[0]: row for row in rows}
        fresh = {}
        for pod, (job_id, k8s_name, namespace) in missing.items():
            row = jobs.get(job_id)
            if row and row[3] == k8s_name and namespace == Team.namespace_for(row[2]):
                fresh[pod] = JobRef(job_id, row[1])
        # A pod name belongs to one attempt of one job for good: safe to remember.
        cache.set_many({keys[pod]: ref for pod, ref in fresh.items()}, GPU_MAP_SECONDS)
        found.update(fresh)
    return found


def batch_owners(node_name: str, samples: Iterable[dict[str, Any]]) -> dict[int, JobRef]:
    """{GPU index: job} for a batch: the pod the agent reported for a GPU ("" for none; the
    newest sample's word wins), and by placement for GPUs reported without one."""
    reported: dict[int, str] = {}
    unreported: set[int] = set()
    for sample in samples:
        if "pod" in sample:
            reported[sample["index"]] = sample["pod"]
        else:
            unreported.add(sample["index"])
    unreported -= reported.keys()
    owners: dict[int, JobRef] = {}
    if unreported or not reported:
        placed = gpu_owners(node_name)
        owners = {i: ref for i, ref in placed.items() if i not in reported}
    by_pod = pod_owners(pod for pod in reported.values() if pod)
    owners.update({i: by_pod[pod] for i, pod in reported.items() if pod in by_pod})
    return owners
