"""Running one GPU type forward in time over the expected ends of its jobs.

Used three times per cycle: to reserve GPUs for blocked jobs (so backfill cannot delay them),
for the pessimistic estimate of when every waiting job starts, and under the expected estimate
(`scheduler.estimate.backfilled_starts`, which walks the queue at each `advance`). `find` takes
jobs in policy order with a clock that only moves forward, so one sweep costs O(ends + jobs)
fit checks for the whole queue, not a re-run per job: the pessimistic projection has no
backfill, so it is never optimistic about jobs ahead.

Each projected job occupies its GPUs from now until its end; taking them from now rather than
from its projected start is conservative and keeps later reservations from ever overlapping it."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from scheduler.model import JobId, Placement
from scheduler.placement import find_placement
from scheduler.pool import NodePool

Event = tuple[float, int, JobId, Placement]


class Sweep:
    def __init__(self, pool: NodePool, now: float, ends: Iterable[tuple[float, JobId, Placement]]):
        self.projected = pool.copy()
        self.time = now
        self._seq = 0
        self._events: list[Event] = []
        self._end_of: dict[JobId, float] = {}
        self.ended: list[JobId] = []
        """The jobs the last `advance` freed."""
        for end, job_id, placement in ends:
            self._push(end, job_id, placement)

    def _push(self, end: float, job_id: JobId, placement: Placement) -> None:
        self._seq += 1
        self._end_of[job_id] = end
        heapq.heappush(self._events, (end, self._seq, job_id, placement))

    def occupy(self, job_id: JobId, placement: Placement, end: float) -> None:
        if end > self.time:
            self.projected.take_clamped(placement)
            self._push(end, job_id, placement)

    def shorten(self, job_id: JobId, placement: Placement, end: float) -> None:
        """A running job now stops at `end` (preempted); `end <= time` frees it at once."""
        if self._end_of.get(job_id, end) <= end:
            return
        if end <= self.time:
            del self._end_of[job_id]
            self.projected.give(placement)
        else:
            self._push(end, job_id, placement)

    def find(self, nodes: int, gpus_per_node: int) -> tuple[float, Placement] | None:
        """The first projected time the gang fits, and where; None if it never does."""
        while True:
            if self.projected.pods(gpus_per_node) >= nodes:
                placement = find_placement(self.projected, nodes, gpus_per_node)
                if placement is not None:
                    return self.time, placement
            if not self.advance():
                return None

    def counting(self) -> CountSweep:
        """Continue from here counting GPUs only, cheaper for the long tail of a queue."""
        ends = [
            (end, sum(g for _, g in placement))
            for end, _, job_id, placement in self._events
            if self._end_of.get(job_id) == end
        ]
        return CountSweep(self.time, self.projected.free_total, ends)

    def advance(self) -> bool:
        """Move the clock to the next projected end and free what ends then; False if none."""
        events = self._events
        while events:
            end, _, job_id, placement = events[0]
            if self._end_of.get(job_id) != end:
                heapq.heappop(events)  # superseded by a shorter end
                continue
            self.time = end
            self.ended = []
            while events and events[0][0] <= end:
                _, _, job_id, placement = heapq.heappop(events)
                if self._end_of.get(job_id) == end:
                    del self._end_of[job_id]
                    self.projected.give(placement)
                    self.ended.append(job_id)
            return True
        return False


class CountSweep:
    """The same forward run on GPU counts: a job fits when enough GPUs of the type are free."""

    def __init__(self, now: float, free: int, ends: list[tuple[float, int]]) -> None:
        self.time, self.free = now, free
        self._ends = list(ends)
        heapq.heapify(self._ends)

    def find(self, gpus: int) -> float | None:
        ends = self._ends
        while self.free < gpus:
            if not ends:
                return None
            self.time, freed = heapq.heappop(ends)
            self.free += freed
        return self.time

    def occupy(self, gpus: int, end: float) -> None:
        if end > self.time:
            self.free -= gpus
            heapq.heappush(self._ends, (end, gpus))
