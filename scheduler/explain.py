"""Why a job that passed its quota checks still waits: the capacity reason codes with figures.

The order of the questions matters: a job that would fit but for a reservation is
BACKFILL_BLOCKED; one that would have fit at the start of the cycle waits for the jobs admitted
ahead of it (PRIORITY); otherwise the shape of the free GPUs decides between GANG_WAIT (part of a
multi-node gang fits), FRAGMENTED (enough GPUs, wrong places) and NO_CAPACITY.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.decisions import Figure, Reason, ReasonCode
from scheduler.model import JobRequest
from scheduler.placement import find_placement
from scheduler.pool import NodePool


def pods_in(counts: Sequence[int], gpus_per_node: int) -> int:
    """Pods of `gpus_per_node` that fit at once, one per node (`NodePool.pods`), in a pool whose
    nodes per free count were `counts`."""
    return sum(counts[c] for c in range(max(gpus_per_node, 1), len(counts)))


def cordoned(job: JobRequest, unschedulable: int) -> Reason:
    figures: dict[str, Figure] = {"gpu_type": job.gpu_type, "nodes": unschedulable}
    return Reason(ReasonCode.ALL_NODES_CORDONED, figures)


def capacity_reason(
    job: JobRequest, pool: NodePool, start_pods: int, jobs_ahead: int, now: float, held_fit: bool
) -> Reason:
    """`start_pods`: pods of the job's size that fit at the start of the cycle; `held_fit`:
    whether it would fit now if reservations held nothing (see `fits_ignoring_holds`)."""
    end = now + job.runtime_limit_s
    if held_fit:
        hold = pool.first_blocking_hold(end)
        if hold is not None:
            figures: dict[str, Figure] = {"blocked_job": hold.job_id, "reserved_start": hold.start}
            return Reason(
                ReasonCode.BACKFILL_BLOCKED, {**figures, "wait_s": round(hold.start - now)}
            )
    if jobs_ahead and start_pods >= job.nodes:
        return Reason(ReasonCode.PRIORITY, {"jobs_ahead": jobs_ahead})
    return shape_reason(job, pool)


def shape_reason(job: JobRequest, pool: NodePool) -> Reason:
    pods = pool.pods(job.gpus_per_node)
    figures: dict[str, Figure] = {
        "gpu_type": job.gpu_type,
        "free": pool.free_total,
        "requested": job.gpus,
    }
    if job.nodes > 1 and 0 < pods < job.nodes:
        gang = {"nodes_available": pods, "nodes": job.nodes, "gpus_per_node": job.gpus_per_node}
        return Reason(ReasonCode.GANG_WAIT, {**figures, **gang})
    if pool.free_total >= job.gpus:
        shape = {"gpus_per_node": job.gpus_per_node, "largest_free": pool.largest_free()}
        return Reason(ReasonCode.FRAGMENTED, {**figures, **shape})
    return Reason(ReasonCode.NO_CAPACITY, figures)


def fits_ignoring_holds(job: JobRequest, pool: NodePool) -> bool:
    if not pool.held_total:
        return False
    return find_placement(pool, job.nodes, job.gpus_per_node, pool.held_by_node()) is not None
