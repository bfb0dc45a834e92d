"""The entry point: `schedule(snapshot, config) -> Decisions`, and the pending explanations.

`decide` is the same cycle over a queue index the caller keeps (the simulator keeps one alive
instead of re-sorting the queue each cycle) with explanations optional.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.config import PolicyConfig
from scheduler.cycle import Cycle, run_cycle
from scheduler.decisions import Decisions, Pending, Reason, ReasonCode
from scheduler.estimate import LowerBound, Releases, backfilled_starts, forward_starts
from scheduler.model import JobId, JobRequest, RunningJob, Snapshot
from scheduler.pool import NodePool
from scheduler.queue import QueueIndex

_OWN_HOLDINGS = (ReasonCode.QUOTA_EXHAUSTED, ReasonCode.MEMBER_CAP)
When = tuple[float | None, tuple[float, float] | None]
"""(estimated start, its range), both None when the job cannot start as things are."""


def schedule(snapshot: Snapshot, config: PolicyConfig, *, explain: bool = True) -> Decisions:
    """Decide one cycle: admissions, preemptions, and (with `explain`) why and until when the
    rest waits. Admissions and preemptions are the same either way; explaining a long queue
    costs more than deciding it."""
    return decide(snapshot, QueueIndex.from_jobs(snapshot.queued), config, explain=explain)


def decide(
    snapshot: Snapshot, queue: QueueIndex, config: PolicyConfig, *, explain: bool
) -> Decisions:
    """`snapshot.queued` is ignored: the queue is `queue`."""
    cycle = run_cycle(snapshot, queue, config, explain)
    pending = _pending(cycle) if explain else {}
    return Decisions(
        cycle.admissions,
        cycle.preemptions,
        pending,
        explained=explain,
        released=cycle.released(),
    )


def _pending(cycle: Cycle) -> dict[JobId, Pending]:
    hopeless = cycle.hopeless
    by_type: dict[str, list[JobRequest]] = {}
    for job in cycle.visited:
        if job.id in hopeless:
            continue
        if cycle.reasons[job.id].code not in _OWN_HOLDINGS and job.gpu_type in cycle.pools:
            by_type.setdefault(job.gpu_type, []).append(job)
    latest: dict[JobId, float | None] = {}
    expected: dict[JobId, float | None] = {}
    bounds: dict[str, LowerBound] = {}
    holdings = cycle.holdings()
    holders = {r.job.id: (r.job.team, r.job.gpus) for r in holdings}
    for gpu_type, waiting in by_type.items():
        latest.update(_latest(cycle, gpu_type, waiting))
        expected.update(_expected(cycle, gpu_type, waiting, holders))
        bounds[gpu_type] = _lower_bound(cycle, gpu_type)
    pending: dict[JobId, Pending] = {}
    releases: Releases | None = None
    reasons, now, reserved = cycle.reasons, cycle.now, cycle.reserved
    floors: dict[tuple[str, int], float | None] = {}  # a few sizes per type: one bisect each
    in_team: dict[str, int] = {}
    for position, job in enumerate(cycle.visited, 1):
        job_id = job.id
        reason = reasons[job_id]
        last = latest.get(job_id)
        when: When = (None, None)
        if job_id in hopeless:
            pass
        elif last is not None:
            last = last if last > now else now
            projected = expected.get(job_id)
            if projected is None or job_id in reserved:
                # a reservation holds: backfill cannot delay the job past it
                projected = last if projected is None or projected > last else projected
            guess = projected if projected > now else now
            size = (job.gpu_type, job.nodes * job.gpus_per_node)
            if size not in floors:
                floors[size] = bounds[size[0]].earliest(size[1], now)
            floor = floors[size]
            earliest = guess if floor is None or floor >= guess else max(now, floor)
            when = (guess, (earliest, last if last > guess else guess))
        elif reason.code in _OWN_HOLDINGS:
            releases = releases or Releases(holdings, now)
            when = _waiting_for_own(now, job, reason, releases)
        if reason.code is ReasonCode.YIELDING:  # its claimant went first: it is in `pending`
            when = _not_before(when, pending.get(int(reason.figures["for_job"])))
        # its place in the whole queue and in its team's, in the policy's order
        in_team[job.team] = in_team.get(job.team, 0) + 1
        pending[job_id] = Pending(reason, *when, position, in_team[job.team])
    return pending


def _not_before(when: When, claimant: Pending | None) -> When:
    """A job yielding to its claimant starts no sooner than the claimant, bound by bound."""
    start, bounds = when
    if claimant is None or start is None or bounds is None:
        return when
    other, other_bounds = claimant.estimated_start, claimant.estimated_start_range
    if other is None or other_bounds is None:
        return when
    (low, high), (other_low, other_high) = bounds, other_bounds
    return max(start, other), (max(low, other_low), max(high, other_high))


def _free_of_holds(cycle: Cycle, gpu_type: str) -> NodePool:
    """The type's pool with the GPUs held for reservations free again (the projections place
    the reserved jobs themselves)."""
    pool = cycle.pools[gpu_type].copy()
    pool.give(tuple((n, h.gpus) for n, hs in cycle.pools[gpu_type].holds.items() for h in hs))
    return pool


def _latest(cycle: Cycle, gpu_type: str, waiting: list[JobRequest]) -> dict[JobId, float | None]:
    """The pessimistic projection: runtime limits, no backfill, the cycle's reservations."""
    pool, ends = _free_of_holds(cycle, gpu_type), cycle.ends(gpu_type, RunningJob.end_by_limit)
    return forward_starts(pool, cycle.now, ends, waiting, cycle.reserved, _runtime_limit)


def _expected(
    cycle: Cycle,
    gpu_type: str,
    waiting: list[JobRequest],
    holders: dict[JobId, tuple[str, int]],
) -> dict[JobId, float | None]:
    """The expected projection: predicted runtimes, backfill, each team's limit (`holders`:
    the team and GPUs of each job holding GPUs, given back to the team at its end)."""
    pool, ends = _free_of_holds(cycle, gpu_type), cycle.ends(gpu_type, _expected_end(cycle.now))
    ledger = cycle.ledger
    room = {
        team: ledger.limit(team, gpu_type) - ledger.used.get((team, gpu_type), 0)
        for team in {job.team for job in waiting}
    }
    return backfilled_starts(pool, cycle.now, ends, waiting, _expected_runtime, room, holders)


def _expected_end(now: float) -> Callable[[RunningJob], float]:
    return lambda running: running.end_expected(now)


def _runtime_limit(job: JobRequest) -> float:
    return job.runtime_limit_s


def _expected_runtime(job: JobRequest) -> float:
    return min(job.expected_runtime_s or job.runtime_limit_s, job.runtime_limit_s)


def _lower_bound(cycle: Cycle, gpu_type: str) -> LowerBound:
    pool = cycle.pools[gpu_type]
    ends = [
        (end, sum(g for _, g in placement))
        for end, _, placement in cycle.ends(gpu_type, _expected_end(cycle.now))
    ]
    return LowerBound(pool.free_total + pool.held_total, ends)


def _waiting_for_own(now: float, job: JobRequest, reason: Reason, releases: Releases) -> When:
    figures = reason.figures
    used, limit = int(figures.get("used", 0)), int(figures.get("limit", figures.get("cap", 0)))
    if job.gpus > limit:
        return None, None
    by_member = reason.code is ReasonCode.MEMBER_CAP
    excess = used + job.gpus - limit
    latest = releases.when(job, by_member, excess, pessimistic=True)
    if latest is None:
        return None, None
    estimate = releases.when(job, by_member, excess, pessimistic=False)
    latest, estimate = max(now, latest), max(now, min(estimate or latest, latest))
    return estimate, (estimate, latest)
