"""Estimated start times for waiting jobs, with a range.

- *latest*: the policy run forward (a Sweep) over the pessimistic ends of running jobs, their
  runtime limits, each job behind the ones ahead; this is also the start backfill protects.
- *estimated*: the scheduler run forward with expected runtimes (learnt where the snapshot has a
  prediction, else the limit): at each projected end the waiting jobs are walked in policy
  order and every one that fits, and that its team's limit lets in, starts, so a job behind
  starts before the jobs ahead where it fits, as the cycle's backfill lets it. A reserved job
  is told no later than its reservation; the range's upper end is the later of the two.
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
from scheduler.placement import find_placement
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
    starts.update(_counted_tail(sweep, waiting[DETAILED:], duration, reserved))
    return starts


def backfilled_starts(
    pool: NodePool,
    now: float,
    ends: list[tuple[float, JobId, Placement]],
    waiting: Sequence[JobRequest],
    duration: Callable[[JobRequest], float],
    room: dict[str, int],
    holders: dict[JobId, tuple[str, int]],
) -> dict[JobId, float | None]:
    """Projected start of each waiting job of one GPU type when, at every projected end, the
    jobs are walked in policy order and each that fits, and that its team's limit lets start,
    starts (backfill: a job behind starts before the jobs ahead where it fits). `room` is each
    team's GPUs of the type left under its limit, `holders` the team and GPUs of each running
    job (they come back to the team at its end). Reservations are not projected."""
    sweep = Sweep(pool, now, ends)
    starts: dict[JobId, float | None] = {}
    room, holders = dict(room), dict(holders)
    remaining = list(waiting[:DETAILED])
    smallest = min((job.gpus_per_node for job in remaining), default=0)
    # What could start now has: the cycle admitted it. The rest starts when something ends.
    while remaining and sweep.advance():
        for job_id in sweep.ended:
            holder = holders.get(job_id)
            if holder is not None:
                room[holder[0]] = room.get(holder[0], 0) + holder[1]
        if not sweep.projected.pods(smallest):
            continue  # no waiting job fits yet: skip the walk
        left: list[JobRequest] = []
        failed: set[tuple[int, int]] = set()
        projected = sweep.projected
        for index, job in enumerate(remaining):
            shape = (job.nodes, job.gpus_per_node)
            if shape in failed or room.get(job.team, 0) < job.gpus:
                left.append(job)
                continue
            placement = None
            if projected.pods(job.gpus_per_node) >= job.nodes:
                placement = find_placement(projected, job.nodes, job.gpus_per_node)
            if placement is None:
                failed.add(shape)
                left.append(job)
                continue
            starts[job.id] = sweep.time
            sweep.occupy(job.id, placement, sweep.time + duration(job))
            room[job.team] -= job.gpus
            holders[job.id] = (job.team, job.gpus)
            if not projected.pods(smallest):  # full again: nobody else starts now
                left.extend(remaining[index + 1 :])
                break
        if len(left) < len(remaining):
            smallest = min((job.gpus_per_node for job in left), default=0)
        remaining = left
    for job in remaining:
        starts[job.id] = None
    starts.update(_counted_tail(sweep, waiting[DETAILED:], duration, {}))
    return starts


def _counted_tail(
    sweep: Sweep,
    tail: Sequence[JobRequest],
    duration: Callable[[JobRequest], float],
    reserved: Reserved,
) -> dict[JobId, float | None]:
    """The queue past the first DETAILED jobs, projected on GPU counts from where `sweep` is
    (a reserved job starts at its reservation)."""
    starts: dict[JobId, float | None] = {}
    if not tail:
        return starts
    counting = sweep.counting()
    for job in tail:
        reservation = reserved.get(job.id)
        start = reservation[0] if reservation else counting.find(job.gpus)
        starts[job.id] = start
        if start is not None:
            counting.occupy(job.gpus, start + duration(job))
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
    """When a team (of one GPU type) or a member (in one team) gives GPUs back, as of `now`."""

    def __init__(self, holdings: Sequence[RunningJob], now: float) -> None:
        self._now = now
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
            holdings, now = self._holdings.get(key[:3], []), self._now
            if pessimistic:
                ends = sorted((r.end_by_limit(), r.job.gpus) for r in holdings)
            else:  # a job past its predicted end is expected to run on (`end_expected`)
                ends = sorted((r.end_expected(now), r.job.gpus) for r in holdings)
            curve = self._curves[key] = ([e for e, _ in ends], list(accumulate(g for _, g in ends)))
        return curve
