"""Choosing victims: the fewest, cheapest running jobs whose GPUs let a waiting job start.

Rules (design section 5): *reclaim* lets a job within its team's guarantee take back GPUs from
teams holding more than their guarantee; *priority* lets a higher queue take GPUs from a lower,
preemptible queue of the same team. Victims go lowest priority first, then the least work lost
(GPU-seconds run so far), then the latest expected end. A job running within its owner's
guarantee is only touched if preemptible, and a victim set is only returned if the waiting job
then fits. Never victims: jobs expected to end within the grace period anyway (by their
expected runtime, not their limit: waiting for them costs nothing), jobs stopped
`max_preemptions` times already, and jobs older than the aging threshold (requeued, they would
go ahead of their preemptor and take their GPUs back, for ever).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.decisions import PreemptionReason
from scheduler.ledger import Ledger
from scheduler.model import JobRequest, RunningJob
from scheduler.placement import find_placement
from scheduler.pool import NodePool


@dataclass(frozen=True, slots=True)
class Victim:
    running: RunningJob
    reason: PreemptionReason


def victim_order(running: RunningJob, now: float) -> tuple[int, float, float, int]:
    """Lowest priority first; then the least work thrown away (GPU-seconds run so far); then
    the job that would hold its GPUs longest anyway (by its expected end, not its limit)."""
    lost = running.job.gpus * (now - running.start_time)
    return (running.job.priority, lost, -running.end_expected(now), running.job.id)


def candidates(
    job: JobRequest, ranked: Sequence[RunningJob], ledger: Ledger, reclaim: bool, priority: bool
) -> list[Victim]:
    """Victims the rules allow in principle, best first; `ranked` is in `victim_order`."""
    may_reclaim = reclaim and ledger.within_guarantee(job)
    found: list[Victim] = []
    for running in ranked:
        other = running.job
        if other.team != job.team:
            if may_reclaim and ledger.borrowing(other.team, other.gpu_type):
                found.append(Victim(running, PreemptionReason.RECLAIM))
        elif priority and other.preemptible and other.priority < job.priority:
            found.append(Victim(running, PreemptionReason.PRIORITY))
    return found


def choose(
    job: JobRequest, offered: list[Victim], pool: NodePool, ledger: Ledger
) -> list[Victim] | None:
    """The victims to stop so that `job` fits, or None if no allowed set makes it fit."""
    quota_short = max(0, ledger.used.get((job.team, job.gpu_type), 0) + job.gpus)
    quota_short -= ledger.limit(job.team, job.gpu_type)
    remaining = {key: ledger.holding(*key) for key in ledger.used}
    chosen: list[Victim] = []
    for victim in offered:
        if not _allowed(victim, remaining, ledger):
            continue
        other = victim.running.job
        key = (other.team, other.gpu_type)
        remaining[key] = remaining.get(key, 0) - other.gpus
        chosen.append(victim)
        if _fits(job, chosen, pool, quota_short):
            return _prune(job, chosen, pool, quota_short)
    return None


def _allowed(victim: Victim, remaining: dict[tuple[str, str], int], ledger: Ledger) -> bool:
    if victim.reason is PreemptionReason.PRIORITY:
        return True
    other = victim.running.job
    used = remaining.get((other.team, other.gpu_type), 0)
    guaranteed = ledger.guaranteed(other.team, other.gpu_type)
    return used > guaranteed and (other.preemptible or used - other.gpus >= guaranteed)


def _fits(job: JobRequest, victims: list[Victim], pool: NodePool, quota_short: int) -> bool:
    own = sum(v.running.job.gpus for v in victims if v.running.job.team == job.team)
    if own < quota_short:
        return False
    extra = freed(victims, pool)
    if pool.free_total + sum(extra.values()) < job.gpus:
        return False
    return find_placement(pool, job.nodes, job.gpus_per_node, extra) is not None


def freed(victims: list[Victim], pool: NodePool) -> dict[str, int]:
    """GPUs the victims give back on schedulable nodes (a cordoned node's GPUs are no use)."""
    extra: dict[str, int] = {}
    for victim in victims:
        for node, gpus in victim.running.placement:
            if node in pool.free:
                extra[node] = extra.get(node, 0) + gpus
    return extra


def _prune(job: JobRequest, chosen: list[Victim], pool: NodePool, quota_short: int) -> list[Victim]:
    """Drop victims that turned out unnecessary, the most valuable (latest chosen) first."""
    kept = list(chosen)
    for victim in reversed(chosen[:-1]):
        trial = [v for v in kept if v is not victim]
        if _fits(job, trial, pool, quota_short):
            kept = trial
    return kept
