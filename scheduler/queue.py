"""The queue, split into streams (one per team and GPU type) kept in team order.

Within a team the order is fixed: queue priority, then submission (FIFO), then id for a total
order. The cluster policy only decides which stream goes next, so a cycle merges the heads of the
streams through a heap instead of sorting every job. A stream whose jobs cannot start this cycle
is left after its first refusal, which is what keeps cycles cheap with long queues.

The simulator keeps one QueueIndex alive across cycles (jobs are added and removed, never
re-sorted); `schedule` builds a fresh one from the snapshot.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable

from scheduler.model import JobId, JobRequest

StreamKey = tuple[str, str]
"""(team, gpu_type)"""
OrderKey = tuple[int, float, JobId]


def order_key(job: JobRequest) -> OrderKey:
    return (-job.priority, job.submit_time, job.id)


class Smallest:
    """A multiset of numbers that answers its minimum without a scan."""

    def __init__(self) -> None:
        self._counts: dict[float, int] = {}
        self._min: float | None = None

    @classmethod
    def of(cls, values: Iterable[float]) -> Smallest:
        smallest = cls()
        smallest._counts = dict(Counter(values))
        smallest._min = min(smallest._counts, default=None)
        return smallest

    def add(self, value: float) -> None:
        self._counts[value] = self._counts.get(value, 0) + 1
        if self._min is None or value < self._min:
            self._min = value

    def remove(self, value: float) -> None:
        left = self._counts[value] - 1
        if left:
            self._counts[value] = left
            return
        del self._counts[value]
        if value == self._min:
            self._min = min(self._counts, default=None)

    def min(self) -> float:
        return float("inf") if self._min is None else self._min


class Stream:
    """One team's queued jobs of one GPU type, in team order, with their smallest demands."""

    def __init__(self, key: StreamKey) -> None:
        self.key = key
        self.orders: list[OrderKey] = []
        self.jobs: list[JobRequest] = []
        self.gpus = Smallest()
        self.gpus_per_node = Smallest()
        self.runtime_limit = Smallest()
        self.submit_time = Smallest()

    def add(self, job: JobRequest) -> None:
        order = order_key(job)
        index = bisect_left(self.orders, order)
        self.orders.insert(index, order)
        self.jobs.insert(index, job)
        self._count(job, Smallest.add)

    def remove(self, job: JobRequest) -> None:
        index = bisect_left(self.orders, order_key(job))
        if index < len(self.jobs) and self.jobs[index].id == job.id:
            del self.orders[index]
            del self.jobs[index]
            self._count(job, Smallest.remove)

    def _count(self, job: JobRequest, change: Callable[[Smallest, float], None]) -> None:
        change(self.gpus, job.gpus)
        change(self.gpus_per_node, job.gpus_per_node)
        change(self.runtime_limit, job.runtime_limit_s)
        change(self.submit_time, job.submit_time)

    def in_order(self, starving_before: float | None) -> list[JobRequest]:
        """Team order, with jobs submitted before `starving_before` first (aging)."""
        if starving_before is None or not self.jobs:
            return self.jobs
        if self.submit_time.min() > starving_before:
            return self.jobs
        old = [job for job in self.jobs if job.submit_time <= starving_before]
        old.sort(key=lambda job: (job.submit_time, job.id))
        return old + [job for job in self.jobs if job.submit_time > starving_before]


class QueueIndex:
    def __init__(self) -> None:
        self.streams: dict[StreamKey, Stream] = {}
        self.size = 0
        self.by_id: dict[JobId, JobRequest] = {}
        self.yielded_to: Counter[JobId] = Counter()
        """Claimant -> queued jobs that were preempted for it (`JobRequest.yields_to`)."""

    @classmethod
    def from_jobs(cls, jobs: Iterable[JobRequest]) -> QueueIndex:
        index = cls()
        grouped: dict[StreamKey, list[JobRequest]] = {}
        for job in jobs:
            grouped.setdefault((job.team, job.gpu_type), []).append(job)
        for key, members in grouped.items():
            stream = index.streams[key] = Stream(key)
            keyed = sorted([(order_key(job), job) for job in members])  # keys are unique
            stream.orders = [order for order, _ in keyed]
            stream.jobs = [job for _, job in keyed]
            stream.gpus = Smallest.of(job.nodes * job.gpus_per_node for job in members)
            stream.gpus_per_node = Smallest.of(job.gpus_per_node for job in members)
            stream.runtime_limit = Smallest.of(job.runtime_limit_s for job in members)
            stream.submit_time = Smallest.of(job.submit_time for job in members)
            index.size += len(members)
            index.by_id.update((job.id, job) for job in members)
            index.yielded_to.update(job.yields_to for job in members if job.yields_to is not None)
        return index

    def add(self, job: JobRequest) -> None:
        key = (job.team, job.gpu_type)
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = Stream(key)
        stream.add(job)
        self.size += 1
        self.by_id[job.id] = job
        if job.yields_to is not None:
            self.yielded_to[job.yields_to] += 1

    def remove(self, job: JobRequest) -> None:
        stream = self.streams.get((job.team, job.gpu_type))
        if stream is not None:
            before = len(stream.jobs)
            stream.remove(job)
            self.size -= before - len(stream.jobs)
            if before > len(stream.jobs):
                removed = self.by_id.pop(job.id)
                if removed.yields_to is not None:
                    self.yielded_to[removed.yields_to] -= 1
                    if not self.yielded_to[removed.yields_to]:
                        del self.yielded_to[removed.yields_to]

    def sorted_streams(self) -> list[Stream]:
        return [self.streams[key] for key in sorted(self.streams) if self.streams[key].jobs]
