"""`ingest_batch`: store a node's validated batch and fan its newest readings out."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from jobs.streams import CLUSTER_GROUP, GpuReading, Outgoing, job_group
from monitoring import hot, rollups, schema
from monitoring.inventory import JobRef, batch_owners, gpu_ids
from monitoring.validation import Batch
from monitoring.xids import store_xids

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


class _Accumulator:
    """Folds a batch's samples, oldest first, into minutes, job totals and the newest per GPU."""

    def __init__(self, interval: float, owners: dict[int, JobRef], previous: dict[int, Any]):
        self.interval, self.owners = interval, owners
        self.minutes: dict[tuple[int, int], _Minute] = {}
        self.jobs: dict[JobRef, _JobTotals] = defaultdict(_JobTotals)
        self.newest: dict[int, dict[str, Any]] = {}
        self._energy = {i: s.get(schema.TOTAL_ENERGY) for i, s in previous.items()}

    def add(self, sample: dict[str, Any]) -> None:
        index = sample["index"]
        owner = self.owners.get(index)
        util = sample.get(schema.GPU_UTIL)
        minute_key = (index, int(sample["at"]) // 60 * 60)
        minute = self.minutes.setdefault(minute_key, _Minute(owner.job_id if owner else None))
        if util is not None:
            minute.samples += 1
            minute.util_sum += util
            minute.power_sum += sample.get(schema.POWER_USAGE, 0.0)
        minute.peak("util", util)
        minute.peak("fb", sample.get(schema.FB_USED))
        minute.peak("temp", sample.get(schema.GPU_TEMP))
        energy_j = self._energy_delta(index, sample.get(schema.TOTAL_ENERGY))
        if owner is not None:
            self._add_to_job(self.jobs[owner], sample, util, energy_j)
        self.newest[index] = sample

    def _energy_delta(self, index: int, energy_mj: Any) -> float:
        if energy_mj is None:
            return 0.0
        before = self._energy.get(index)
        self._energy[index] = energy_mj
        # A counter that went back (driver reload) restarts; its first reading adds nothing.
        return (energy_mj - before) / MJ_PER_J if before is not None and energy_mj >= before else 0

    def _add_to_job(
        self, totals: _JobTotals, sample: dict[str, Any], util: Any, energy_j: float
    ) -> None:
        totals.gpu_seconds += self.interval
        totals.energy_j += energy_j
        if util is not None:
            totals.samples += 1
            totals.util_sum += util
            totals.util_peak = max(totals.util_peak, util)
        totals.fb_peak = max(totals.fb_peak, sample.get(schema.FB_USED, 0.0))


def _minute_rows(acc: _Accumulator, ids: dict[int, int]) -> list[tuple[Any, ...]]:
    return [
        (
            ids[index],
            minute,
            m.job_id,
            m.samples,
            m.util_sum,
            m.maxima.get("util"),
            m.maxima.get("fb"),
            m.maxima.get("temp"),
            m.power_sum,
        )
        for (index, minute), m in acc.minutes.items()
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


def _fan_out(node: str, acc: _Accumulator) -> list[tuple[str, Any]]:
    """One message per job on the node and one for the admins, with the newest readings."""
    readings = {i: reading(node, s, _job_id(acc.owners, i)) for i, s in sorted(acc.newest.items())}
    by_job: dict[JobRef, list[GpuReading]] = defaultdict(list)
    for index, gpu in readings.items():
        if (owner := acc.owners.get(index)) is not None:
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


def ingest_batch(node_id: int, node: str, batch: Batch) -> Outgoing:
    """Roll the batch up, keep its newest readings hot, store its Xids; return the messages
    to fan out, which the caller sends once this has committed."""
    indexes = {g["index"] for g in batch.gpus} | {x["index"] for x in batch.xids}
    ids = gpu_ids(node_id, indexes)
    owners = batch_owners(node, batch.gpus)
    previous = {i: s for (_, i), s in hot.latest((node_id, i) for i in indexes).items()}
    acc = _Accumulator(batch.interval, owners, previous)
    for sample in batch.gpus:
        acc.add(sample)
    with transaction.atomic():
        rollups.add_minutes(_minute_rows(acc, ids))
        rollups.add_job_totals(_job_rows(acc))
        xid_messages = store_xids(node_id, node, ids, batch.xids)
    hot.store(node_id, {i: {**s, "job_id": _job_id(owners, i)} for i, s in acc.newest.items()})
    return [*(_fan_out(node, acc) if acc.newest else []), *xid_messages]


def _job_id(owners: dict[int, JobRef], index: int) -> int | None:
    owner = owners.get(index)
    return owner.job_id if owner else None
