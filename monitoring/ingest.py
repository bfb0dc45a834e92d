"""`ingest_batches`: store nodes' validated batches together and fan their newest readings out."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from base.streams import CLUSTER_GROUP, GpuReading, Outgoing, job_group
from cluster.models import Node
from monitoring import hot, rollups, schema
from monitoring.gpu_owners import (
    JobRef,
    batch_owners,
    gpu_ids,
    gpu_ids_key,
    owners_key,
    placement_owners,
)
from monitoring.prefetch import CacheReads, Prefetched
from monitoring.validation import Batch
from monitoring.xids import store_xids

log = logging.getLogger(__name__)

MJ_PER_J = 1000


@dataclass
class _JobTotals:
    samples: int = 0
    util_sum: float = 0.0
    util_peak: float = 0.0
    fb_peak: float = 0.0
    energy_j: float = 0.0
    gpu_seconds: float = 0.0


@dataclass
class _Minute:
    job_id: int | None
    samples: int = 0
    util_sum: float = 0.0
    power_sum: float = 0.0
    maxima: dict[str, float] = field(default_factory=dict)

    def peak(self, name: str, value: Any) -> None:
        if value is not None and value > self.maxima.get(name, -1.0):
            self.maxima[name] = value


def reading(node: str, sample: dict[str, Any], job_id: int | None) -> GpuReading:
    return {
        "node": node,
        "index": sample["index"],
        "at": sample["at"],
        "util": sample.get(schema.GPU_UTIL),
        "sm_active": sample.get(schema.SM_ACTIVE),
        "fb_used": sample.get(schema.FB_USED),
        "fb_total": sample.get(schema.FB_TOTAL),
        "temp": sample.get(schema.GPU_TEMP),
        "power": sample.get(schema.POWER_USAGE),
        "job_id": job_id,
    }


GpuKey = tuple[int, int]  # (node id, index)


@dataclass(frozen=True)
class Accepted:
    """A batch whose token and body passed, from node `node_id` named `node`."""

    node_id: int
    node: str
    batch: Batch


class _Accumulator:
    """Folds batches' samples, each batch oldest first, into minutes, job totals and the newest
    sample per GPU."""

    def __init__(self, previous: dict[GpuKey, Any]):
        self.minutes: dict[tuple[int, int, int], _Minute] = {}
        self.jobs: dict[JobRef, _JobTotals] = defaultdict(_JobTotals)
        self.newest: dict[GpuKey, dict[str, Any]] = {}
        self._energy = {gpu: s.get(schema.TOTAL_ENERGY) for gpu, s in previous.items()}

    def add_batch(self, node_id: int, batch: Batch, owners: dict[int, JobRef]) -> None:
        for sample in batch.gpus:
            self.add(node_id, sample, owners.get(sample["index"]), batch.interval)

    def add(
        self, node_id: int, sample: dict[str, Any], owner: JobRef | None, interval: float
    ) -> None:
        gpu = (node_id, sample["index"])
        util = sample.get(schema.GPU_UTIL)
        minute_key = (*gpu, int(sample["at"]) // 60 * 60)
        minute = self.minutes.get(minute_key)
        if minute is None:
            minute = self.minutes[minute_key] = _Minute(None)
        if owner is not None:  # as the upsert does: the latest known job of the minute wins
            minute.job_id = owner.job_id
        if util is not None:
            minute.samples += 1
            minute.util_sum += util
            minute.power_sum += sample.get(schema.POWER_USAGE, 0.0)
        minute.peak("util", util)
        minute.peak("fb", sample.get(schema.FB_USED))
        minute.peak("temp", sample.get(schema.GPU_TEMP))
        energy_j = self._energy_delta(gpu, sample.get(schema.TOTAL_ENERGY))
        if owner is not None:
            self._add_to_job(self.jobs[owner], sample, util, energy_j, interval)
        self.newest[gpu] = sample

    def _energy_delta(self, gpu: GpuKey, energy_mj: Any) -> float:
        if energy_mj is None:
            return 0.0
        before = self._energy.get(gpu)
        self._energy[gpu] = energy_mj
        # A counter that went back (driver reload) restarts; its first reading adds nothing.
        return (energy_mj - before) / MJ_PER_J if before is not None and energy_mj >= before else 0

    @staticmethod
    def _add_to_job(
        totals: _JobTotals, sample: dict[str, Any], util: Any, energy_j: float, interval: float
    ) -> None:
        totals.gpu_seconds += interval
        totals.energy_j += energy_j
        if util is not None:
            totals.samples += 1
            totals.util_sum += util
            totals.util_peak = max(totals.util_peak, util)
        totals.fb_peak = max(totals.fb_peak, sample.get(schema.FB_USED, 0.0))


def _minute_rows(acc: _Accumulator, ids: dict[int, dict[int, int]]) -> list[tuple[Any, ...]]:
    return [
        (
            ids[node_id][index],
            minute,
            m.job_id,
            m.samples,
            m.util_sum,
            m.maxima.get("util"),
            m.maxima.get("fb"),
            m.maxima.get("temp"),
            m.power_sum,
        )
        for (node_id, index, minute), m in acc.minutes.items()
    ]


def _job_rows(acc: _Accumulator) -> list[tuple[Any, ...]]:
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    return [
        (
            ref.job_id,
            ref.team_id,
            t.samples,
            t.util_sum,
            t.util_peak,
            t.fb_peak,
            t.energy_j,
            t.gpu_seconds,
            now,
        )
        for ref, t in acc.jobs.items()
    ]


def _fan_out(node: str, batch: Batch, owners: dict[int, JobRef]) -> list[tuple[str, Any]]:
    """One message per job on the node and one for the admins, with the newest readings."""
    newest = {s["index"]: s for s in batch.gpus}  # oldest first: the newest per GPU wins
    readings = {i: reading(node, s, _job_id(owners, i)) for i, s in sorted(newest.items())}
    by_job: dict[JobRef, list[GpuReading]] = defaultdict(list)
    for index, gpu in readings.items():
        if (owner := owners.get(index)) is not None:
            by_job[owner].append(gpu)
    outgoing: list[tuple[str, Any]] = [
        (
            job_group(ref.team_id, ref.job_id),
            {"type": "job.metrics", "job_id": ref.job_id, "gpus": gpus},
        )
        for ref, gpus in by_job.items()
    ]
    outgoing.append(
        (CLUSTER_GROUP, {"type": "cluster.gpus", "node": node, "gpus": list(readings.values())})
    )
    return outgoing


def ingest_batches(batches: Sequence[Accepted], reads: Prefetched | None = None) -> list[Outgoing]:
    """Roll the batches up in one transaction, keep their newest readings hot, store their
    Xids; return each batch's messages to fan out, which the caller sends once this returns
    (committed). `reads`: what the caller read of the cache already (see `node_keys`).

    A batch already stored (a resend whose first answer was lost: same node, agent start and
    sequence number) is stored no further and fans nothing out."""
    if _repeated_starts(batches):  # a resend with its original: one after the other
        return [out for a in batches for out in ingest_batches([a], reads)]
    wanted: dict[int, set[int]] = defaultdict(set)
    for a in batches:
        wanted[a.node_id].update(g["index"] for g in a.batch.gpus)
        wanted[a.node_id].update(x["index"] for x in a.batch.xids)
    nodes = {(a.node_id, a.node) for a in batches}
    if reads is None:
        reads = Prefetched(node_keys(nodes))
    reads.prefetch(node_keys(nodes))
    ids = gpu_ids(wanted, reads)
    owners = _placed_on_poster(
        batches, batch_owners([(a.node, a.batch.gpus) for a in batches], reads), reads
    )
    previous = hot.of_nodes(wanted, reads)
    before = hot.hosts(wanted, reads)
    acc = _fold(batches, owners, previous)
    identified = any(a.batch.seq is not None for a in batches)
    with (
        transaction.atomic() if identified or any(a.batch.xids for a in batches) else nullcontext()
    ):
        fresh = _claim(batches)
        if not all(fresh):
            batches = [a for a, new in zip(batches, fresh, strict=True) if new]
            owners = [owned for owned, new in zip(owners, fresh, strict=True) if new]
            acc = _fold(batches, owners, previous)
        rollups.add(_minute_rows(acc, ids), _job_rows(acc))  # alone: atomic by itself
        xids = [store_xids(a.node_id, a.node, ids[a.node_id], a.batch.xids) for a in batches]
        readings = _node_readings(batches)
        _record_drivers(readings, before)
    try:
        hot.store(_hot_samples(batches, owners, acc, previous), readings)
    except Exception:  # committed: an error now would have the agents post it all again
        log.exception("keeping the newest samples of %s batches failed", len(batches))
    stored = iter(
        [
            [*(_fan_out(a.node, a.batch, owned) if a.batch.gpus else []), *messages]
            for a, owned, messages in zip(batches, owners, xids, strict=True)
        ]
    )
    return [next(stored) if new else [] for new in fresh]


def _node_readings(batches: Sequence[Accepted]) -> dict[int, dict[str, Any]]:
    """Each node's newest node-level reading among these batches."""
    newest: dict[int, dict[str, Any]] = {}
    for a in batches:
        host = a.batch.host
        if host is not None and host["at"] >= newest.get(a.node_id, {}).get("at", -1.0):
            newest[a.node_id] = host
    return newest


def _record_drivers(readings: dict[int, dict[str, Any]], before: dict[int, dict[str, Any]]) -> None:
    """Keep on the node the driver its agent reports, when it differs from the last reading
    (so a steady driver costs no query)."""
    for node_id, reading in readings.items():
        driver = reading.get(schema.DRIVER)
        if driver and driver != before.get(node_id, {}).get(schema.DRIVER):
            Node.objects.filter(pk=node_id).exclude(driver_version=driver).update(
                driver_version=driver
            )


def _fold(
    batches: Sequence[Accepted], owners: list[dict[int, JobRef]], previous: dict[int, hot.Samples]
) -> _Accumulator:
    acc = _Accumulator({(n, i): s for n, samples in previous.items() for i, s in samples.items()})
    for a, owned in zip(batches, owners, strict=True):
        acc.add_batch(a.node_id, a.batch, owned)
    return acc


def _start(a: Accepted) -> tuple[int, str] | None:
    """The agent start that sent the batch, when it says (see `validation.Batch.boot`)."""
    return (a.node_id, a.batch.boot) if a.batch.boot is not None else None


def _repeated_starts(batches: Sequence[Accepted]) -> bool:
    starts = [start for a in batches if (start := _start(a)) is not None]
    return len(starts) != len(set(starts))


def _claim(batches: Sequence[Accepted]) -> list[bool]:
    """Whether each batch is new (to store); a batch without an identity always is."""
    identities = [
        (a.node_id, a.batch.boot, a.batch.seq)
        for a in batches
        if a.batch.boot is not None and a.batch.seq is not None
    ]
    new = rollups.claim(identities)
    return [(start := _start(a)) is None or start in new for a in batches]


def _placed_on_poster(
    batches: Sequence[Accepted], owners: list[dict[int, JobRef]], reads: Prefetched
) -> list[dict[int, JobRef]]:
    """Each batch's owners, less the jobs not placed on the node that posted it: an agent
    speaks for its own node's GPUs, so a pod it names must run there (by the job's placement),
    or one node's agent could write another tenant's GPU-hours and energy."""
    claims = {
        a.node: set(owned.values())
        for a, owned in zip(batches, owners, strict=True)
        if any(s.get("pod") for s in a.batch.gpus)
    }
    if not claims:
        return owners  # attributed by placement alone: to jobs on the posting node
    placed = _jobs_placed(claims, reads)
    if stale := {node for node, jobs in claims.items() if not jobs <= placed[node]}:
        # The cached placement may predate a job's start: ask the database before refusing.
        placed.update(_jobs_placed(stale, _NOTHING_CACHED))
    return [
        _on_node(a, owned, placed[a.node]) if a.node in claims else owned
        for a, owned in zip(batches, owners, strict=True)
    ]


def _jobs_placed(nodes: Collection[str], reads: CacheReads) -> dict[str, set[JobRef]]:
    return {node: set(jobs.values()) for node, jobs in placement_owners(nodes, reads).items()}


class _NothingCached:
    """Reads that find nothing, so `placement_owners` reads the database (and caches it)."""

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        return {}


_NOTHING_CACHED = _NothingCached()


def _on_node(posted: Accepted, owned: dict[int, JobRef], here: set[JobRef]) -> dict[int, JobRef]:
    foreign = {index: ref for index, ref in owned.items() if ref not in here}
    if foreign:
        log.warning(
            "node %s named pods of jobs %s, which are not placed on it: its %s samples of "
            "GPUs %s count for no job",
            posted.node,
            sorted({ref.job_id for ref in foreign.values()}),
            sum(1 for s in posted.batch.gpus if s["index"] in foreign),
            sorted(foreign),
        )
    return {index: ref for index, ref in owned.items() if index not in foreign}


def node_keys(nodes: Iterable[tuple[int, str]]) -> set[str]:
    """What ingestion reads of nodes (id, name) in the cache: GPU rows, owners, samples, the
    node-level reading."""
    keys: set[str] = set()
    for node_id, name in nodes:
        keys |= {gpu_ids_key(node_id), owners_key(name), hot.key(node_id)}
        keys.add(hot.host_key(node_id))
    return keys


def _hot_samples(
    batches: Sequence[Accepted],
    owners: list[dict[int, JobRef]],
    acc: _Accumulator,
    previous: dict[int, hot.Samples],
) -> dict[int, hot.Samples]:
    """Each node's latest samples: what it had, updated with the newest of these batches."""
    job_ids = {
        (a.node_id, index): ref.job_id
        for a, owned in zip(batches, owners, strict=True)
        for index, ref in owned.items()
    }
    nodes = {a.node_id: dict(previous.get(a.node_id, {})) for a in batches}
    for (node_id, index), sample in acc.newest.items():
        nodes[node_id][index] = {**sample, "job_id": job_ids.get((node_id, index))}
    return nodes


def _job_id(owners: dict[int, JobRef], index: int) -> int | None:
    owner = owners.get(index)
    return owner.job_id if owner else None
