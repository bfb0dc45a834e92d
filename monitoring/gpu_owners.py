"""Which GPU row and which job stand behind a node's GPU index."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache

from cluster.manifests import job_of_pod
from cluster.models import Gpu
from jobs.models import Job, State
from monitoring.prefetch import CacheReads
from tenants.models import Team

GPU_MAP_SECONDS = 300
# Placements change at admission and at the end of a job; a few seconds of stale attribution
# spare every batch a query.
OWNERS_SECONDS = 5


@dataclass(frozen=True)
class JobRef:
    job_id: int
    team_id: int


def gpu_ids_key(node_id: int) -> str:
    return f"monitoring.gpu-ids.{node_id}"


def owners_key(node_name: str) -> str:
    return f"monitoring.gpu-owners.{node_name}"


def gpu_ids(wanted: dict[int, set[int]], reads: CacheReads = cache) -> dict[int, dict[int, int]]:
    """{node id: {index: Gpu id}} for these nodes' indexes, creating rows the inventory lacks."""
    keys = {node_id: gpu_ids_key(node_id) for node_id in wanted}
    cached = reads.get_many(keys.values())
    known: dict[int, dict[int, int]] = {n: cached.get(key) or {} for n, key in keys.items()}
    short = {n for n, indexes in wanted.items() if not indexes <= known[n].keys()}
    if short:
        Gpu.objects.bulk_create(
            [Gpu(node_id=n, index=i) for n in short for i in wanted[n] - known[n].keys()],
            ignore_conflicts=True,
        )
        fresh: dict[int, dict[int, int]] = {n: {} for n in short}
        for node_id, index, pk in Gpu.objects.filter(node_id__in=short).values_list(
            "node_id", "index", "id"
        ):
            fresh[node_id][index] = pk
        cache.set_many({keys[n]: fresh[n] for n in short}, GPU_MAP_SECONDS)
        known.update(fresh)
    return known


def placement_owners(
    node_names: Collection[str], reads: CacheReads = cache
) -> dict[str, dict[int, JobRef]]:
    """{node: {GPU index: job}} for the jobs running on these nodes, by placement.

    Job.placement says how many GPUs of a node a job holds, not which. Jobs are laid over the
    indexes in the order they started (then by id), as a first-fit device plugin hands out free
    GPUs; when an earlier job ends before a later one, the attribution can be off until the
    later job ends too. Agents that read the kubelet's pod-resources socket say exactly which
    pod holds each GPU; `batch_owners` prefers that.
    """
    keys = {name: owners_key(name) for name in node_names}
    cached = reads.get_many(keys.values())
    owners: dict[str, dict[int, JobRef]] = {n: cached[k] for n, k in keys.items() if k in cached}
    missing = [name for name in keys if name not in owners]
    if missing:
        fresh = _placed(missing)
        cache.set_many({keys[name]: placed for name, placed in fresh.items()}, OWNERS_SECONDS)
        owners.update(fresh)
    return owners


def _placed(node_names: list[str]) -> dict[str, dict[int, JobRef]]:
    running = (
        Job.unscoped.filter(state=State.RUNNING, placement__has_any_keys=node_names)
        .order_by("started_at", "id")
        .values_list("id", "team_id", "placement")
    )
    owners: dict[str, dict[int, JobRef]] = {name: {} for name in node_names}
    for job_id, team_id, placement in running:
        for name, count in placement.items():
            if (placed := owners.get(name)) is not None:
                first = len(placed)
                ref = JobRef(job_id, team_id)
                placed.update({i: ref for i in range(first, first + int(count))})
    return owners


def pod_owners(pods: Iterable[str]) -> dict[str, JobRef]:
    """{"namespace/pod": job} for pods of running portal jobs, checked against the job's team
    namespace and current attempt (a pod of another team's namespace claims nothing)."""
    wanted: dict[str, tuple[int, str, str]] = {}
    for pod in set(pods):
        namespace, _, name = pod.partition("/")
        if (owner := job_of_pod(name)) is not None:
            wanted[pod] = (owner[0], owner[1], namespace)
    if not wanted:
        return {}
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


def batch_owners(
    batches: Sequence[tuple[str, list[dict[str, Any]]]], reads: CacheReads = cache
) -> list[dict[int, JobRef]]:
    """{GPU index: job} for each (node name, samples): the pod the agent reported for a GPU
    ("" for none; the newest sample's word wins), and by placement for GPUs reported without
    one. One lookup of each kind serves all the batches."""
    reported = [_reported_pods(samples) for _, samples in batches]
    unplaced = {name for (name, _), (pods, rest) in zip(batches, reported, strict=True) if rest}
    placed = placement_owners(unplaced, reads) if unplaced else {}
    by_pod = pod_owners(pod for pods, _ in reported for pod in pods.values() if pod)
    owners = []
    for (name, _), (pods, _) in zip(batches, reported, strict=True):
        found = {i: ref for i, ref in placed.get(name, {}).items() if i not in pods}
        found.update({i: by_pod[pod] for i, pod in pods.items() if pod in by_pod})
        owners.append(found)
    return owners


def _reported_pods(samples: list[dict[str, Any]]) -> tuple[dict[int, str], bool]:
    """({index: pod} as reported, whether the placement is needed: for GPUs reported without a
    pod, or when no GPU reports one)."""
    reported: dict[int, str] = {}
    unreported: set[int] = set()
    for sample in samples:
        if "pod" in sample:
            reported[sample["index"]] = sample["pod"]
        else:
            unreported.add(sample["index"])
    return reported, bool(unreported - reported.keys()) or not reported
