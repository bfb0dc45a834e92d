"""Estimated start times for waiting jobs, with a range.

- *latest*: the policy run forward (a Sweep) over the pessimistic ends of running jobs, their
  runtime limits; this is also the start backfill protects.
- *estimated*: the same with expected runtimes where the snapshot has a prediction (otherwise it
  equals latest).
- *earliest*: a lower bound, the first moment enough GPUs of the type could be free if no job
  ahead claimed them (one bisect over cumulative expected ends).

A job blocked by its quota waits for its own team (or member) to give GPUs back; its estimate is
when enough of that team's running jobs end.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate

from scheduler.model import JobId, JobRequest, Placement, RunningJob
from scheduler.pool import NodePool
from scheduler.sweep import Sweep

EndOf = Callable[[RunningJob], float]
DETAILED = 200
"""Waiting jobs per GPU type projected node by node; the rest of the queue is projected on GPU
counts (ignoring fragmentation), which keeps a cycle over a 10,000-job queue cheap."""
Reserved = dict[JobId, tuple[float, Placement]]


def forward_starts(
    pool: NodePool,
    now: float,
    ends: list[tuple[float, JobId, Placement]],
    waiting: Sequence[JobRequest],
    reserved: Reserved,
    duration: Callable[[JobRequest], float],
) -> dict[JobId, float | None]:
    """Projected start of each waiting job (in policy order) of one GPU type."""
    sweep = Sweep(pool, now, ends)
    starts: dict[JobId, float | None] = {}
    for job in waiting[:DETAILED]:
        found = reserved.get(job.id) or sweep.find(job.nodes, job.gpus_per_node)
        if found is None:
            starts[job.id] = None
            continue
        start, placement = found
        starts[job.id] = start
        sweep.occupy(job.id, placement, start + duration(job))
    if len(waiting) > DETAILED:
        counting = sweep.counting()
        for job in waiting[DETAILED:]:
            reservation = reserved.get(job.id)
            tail_start = reservation[0] if reservation else counting.find(job.gpus)
            starts[job.id] = tail_start
            if tail_start is not None:
                counting.occupy(job.gpus, tail_start + duration(job))
    return starts


class LowerBound:
    """When `gpus` could first be free, counting only GPUs already free and running jobs' ends."""

    def __init__(self, free: int, ends: list[tuple[float, int]]) -> None:
        ends.sort()
        self._times = [end for end, _ in ends]
        self._freed = list(accumulate(gpus for _, gpus in ends))
        self._free = free

    def earliest(self, gpus: int, now: float) -> float | None:
        missing = gpus - self._free
        if missing <= 0:
            return now
        index = bisect_left(self._freed, missing)
        return max(now, self._times[index]) if index < len(self._times) else None


class Releases:
    """When a team (of one GPU type) or a member (in one team) gives GPUs back."""

    def __init__(self, holdings: Sequence[RunningJob]) -> None:
        self._holdings: dict[tuple[str, str, bool], list[RunningJob]] = {}
        for running in holdings:
            job = running.job
            self._holdings.setdefault((job.team, job.gpu_type, False), []).append(running)
            self._holdings.setdefault((job.team, job.member, True), []).append(running)
        self._curves: dict[tuple[str, str, bool, bool], tuple[list[float], list[int]]] = {}

    def when(
        self, job: JobRequest, by_member: bool, excess: int, pessimistic: bool
    ) -> float | None:
        """The first end after which `excess` GPUs have been given back (-inf if none needed)."""
        if excess <= 0:
            return float("-inf")
        times, freed = self._curve(
            job.team, job.member if by_member else job.gpu_type, by_member, pessimistic
        )
        index = bisect_left(freed, excess)
        return times[index] if index < len(times) else None

    def _curve(
        self, team: str, scope: str, by_member: bool, pessimistic: bool
    ) -> tuple[list[float], list[int]]:
        key = (team, scope, by_member, pessimistic)
        curve = self._curves.get(key)
        if curve is None:
            end_of = RunningJob.end_by_limit if pessimistic else RunningJob.end_expected
            ends = sorted((end_of(r), r.job.gpus) for r in self._holdings.get(key[:3], []))
            curve = self._curves[key] = ([e for e, _ in ends], list(accumulate(g for _, g in ends)))
        return curve
