"""Jobs that can never start as things are: larger than their team's quota limit, their owner's
cap, their department's guarantee (where borrowing stops there), or the nodes of their GPU type.

Such a job would wait for ever looking like any other waiting job; it is told so, with the
figures, until the setting changes (a quota raised, nodes added). Unhealthy GPUs and cordoned
nodes do not count against it: they come back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.config import PolicyConfig
from scheduler.decisions import Figure, Reason, ReasonCode
from scheduler.ledger import Ledger
from scheduler.model import JobRequest, NodeState

LIMITS = (
    "team quota",
    "department quota",
    "member cap",
    "node count",
    "node size",
    "GPU type",
)
"""The settings a NEVER_FITS reason names (`limit_by`), for pages to translate."""


@dataclass(frozen=True, slots=True)
class Shape:
    """The nodes of one GPU type: how many, the largest, and all their GPUs."""

    nodes: int
    largest: int
    gpus: int


def shapes(nodes: Iterable[NodeState]) -> dict[str, Shape]:
    found: dict[str, Shape] = {}
    for node in nodes:
        known = found.get(node.gpu_type, Shape(0, 0, 0))
        found[node.gpu_type] = Shape(
            known.nodes + 1, max(known.largest, node.size), known.gpus + node.size
        )
    return found


def never_fits(
    job: JobRequest, ledger: Ledger, config: PolicyConfig, by_type: dict[str, Shape]
) -> Reason | None:
    """Why `job` cannot start whatever else ends, or None if it could."""
    shape = by_type.get(job.gpu_type, Shape(0, 0, 0))
    limit = ledger.limit(job.team, job.gpu_type)
    checks = (
        ("nodes", job.nodes, shape.nodes, "node count"),
        ("gpus_per_node", job.gpus_per_node, shape.largest, "node size"),
        ("gpus", job.gpus, shape.gpus, "GPU type"),
        ("gpus", job.gpus, limit, "team quota"),
        ("gpus", job.gpus, ledger.cap(job.team, job.member), "member cap"),
    )
    for field, requested, allowed, limit_by in checks:
        if allowed is not None and requested > allowed:
            return _reason(job, field, requested, allowed, limit_by)
    if not config.borrow_across_departments:
        dept = max(ledger.department_guaranteed(job.team, job.gpu_type), 0)
        if job.gpus > max(dept, ledger.guaranteed(job.team, job.gpu_type)):
            return _reason(job, "gpus", job.gpus, dept, "department quota")
    return None


def _reason(job: JobRequest, field: str, requested: int, limit: int, limit_by: str) -> Reason:
    figures: dict[str, Figure] = {"field": field, "requested": requested, "limit": limit}
    figures.update(limit_by=limit_by, gpu_type=job.gpu_type)
    return Reason(ReasonCode.NEVER_FITS, figures)
