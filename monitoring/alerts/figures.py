"""What a round of alert evaluation reads: every metric's value per subject, and where each
subject belongs (node, GPU type, team, job) for rules' scopes and for routing.

Subjects: a GPU is "node/gpuN", a node its name, a job "job N". Metrics: every numeric field of
the GPUs' latest samples (DCGM names), and the portal's figures (`PORTAL_FIGURES`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q

from cluster.models import Node
from cluster.snapshot import usable_gpus
from jobs.models import HOLDING_STATES, Job, State
from monitoring import hot
from monitoring.inspections import failed_checks

THROTTLED = "portal_gpu_throttled"
NOT_READY = "portal_node_not_ready"
GPUS_MISSING = "portal_node_gpus_missing"
AGENT_SILENT = "portal_agent_silent_seconds"
INSPECTION_FAILED = "portal_node_inspection_failed"
JOB_PENDING = "portal_job_pending_seconds"
PORTAL_FIGURES = {
    THROTTLED: "1 while a GPU's clocks are held down by its power cap or by heat",
    NOT_READY: "1 while a node is NotReady",
    GPUS_MISSING: "a node's GPUs below its capacity (not allocatable, or unhealthy)",
    AGENT_SILENT: "seconds since a node's agent last sent a sample",
    INSPECTION_FAILED: "checks a node failed in the latest health inspection",
    JOB_PENDING: "seconds a queued job has waited",
}
# NVML clocks-event reasons: SW power cap, HW slowdown, SW thermal, HW thermal, HW power brake.
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
THROTTLE_REASONS = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
NOT_METRICS = {"index", "at", "uuid", "pod", "job_id"}


@dataclass(frozen=True, slots=True)
class Where:
    """What a subject belongs to."""

    node_id: int | None = None
    node: str = ""
    gpu_type: str = ""
    team_id: int | None = None
    team: str = ""
    job_id: int | None = None


Figures = dict[str, dict[str, tuple[float, Where]]]
"""metric → subject → (value, where)."""


def gather(now: datetime) -> Figures:
    """Every metric's current value per subject."""
    figures: Figures = defaultdict(dict)
    nodes = list(
        Node.objects.values_list(
            "id",
            "name",
            "gpu_type__name",
            "ready",
            "gpu_capacity",
            "gpu_allocatable",
            "agent_token_hash",
        ).annotate(unhealthy=Count("gpus", filter=Q(gpus__healthy=False)))
    )
    samples = hot.of_nodes(node_id for node_id, *_ in nodes)
    inspected = failed_checks()
    jobs = _jobs()
    for node_id, name, gpu_type, ready, capacity, allocatable, token, unhealthy in nodes:
        where = Where(node_id, name, gpu_type or "")
        figures[NOT_READY][name] = (0.0 if ready else 1.0, where)
        missing = capacity - usable_gpus(capacity, allocatable, unhealthy)
        figures[GPUS_MISSING][name] = (float(missing), where)
        if node_id in inspected:
            figures[INSPECTION_FAILED][name] = (float(inspected[node_id]), where)
        latest = samples.get(node_id, {})
        if latest:
            newest = max(s.get("at", 0) for s in latest.values())
            figures[AGENT_SILENT][name] = (max(0.0, now.timestamp() - newest), where)
        elif token:  # an agent was given a token and has said nothing this past hour
            figures[AGENT_SILENT][name] = (float(hot.LATEST_SECONDS), where)
        for index, sample in latest.items():
            _add_gpu(figures, f"{name}/gpu{index}", sample, _gpu_where(where, sample, jobs))
    _add_queued(figures, now)
    return figures


def _jobs() -> dict[int, tuple[int, str]]:
    """{job id: (team id, team slug)} of the jobs holding GPUs."""
    rows = Job.unscoped.filter(state__in=HOLDING_STATES).values_list("id", "team_id", "team__slug")
    return {job_id: (team_id, slug) for job_id, team_id, slug in rows}


def _gpu_where(node: Where, sample: dict[str, Any], jobs: dict[int, tuple[int, str]]) -> Where:
    job_id = sample.get("job_id")
    if job_id is None or job_id not in jobs:
        return node
    team_id, slug = jobs[job_id]
    return Where(node.node_id, node.node, node.gpu_type, team_id, slug, job_id)


def _add_gpu(figures: Figures, subject: str, sample: dict[str, Any], where: Where) -> None:
    for metric, value in sample.items():
        if metric not in NOT_METRICS and isinstance(value, int | float):
            figures[metric][subject] = (float(value), where)
    reasons = sample.get(THROTTLE_REASONS)
    if isinstance(reasons, int):
        figures[THROTTLED][subject] = (1.0 if reasons & THROTTLE_MASK else 0.0, where)


def _add_queued(figures: Figures, now: datetime) -> None:
    queued = Job.unscoped.filter(state=State.QUEUED).values_list(
        "id", "team_id", "team__slug", "gpu_type__name", "submitted_at"
    )
    for job_id, team_id, slug, gpu_type, submitted_at in queued:
        where = Where(gpu_type=gpu_type, team_id=team_id, team=slug, job_id=job_id)
        waited = (now - submitted_at).total_seconds()
        figures[JOB_PENDING][f"job {job_id}"] = (waited, where)
