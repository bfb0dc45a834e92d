"""What a round of alert evaluation reads: the values of the metrics its rules name, per
subject, and where each subject belongs (node, GPU type, team, job) for rules' scopes and for
routing.

Subjects: a GPU is "node/gpuN", a node its name, a job "job N". Metrics: every numeric field of
the GPUs' latest samples (DCGM names), and the portal's figures (`PORTAL_FIGURES`).

At 8,000 GPUs a sample's fields are some 200,000 values, and nearly none of them past a
threshold: a round (`read`) keeps the samples as they are and makes a field's values only
when a rule asks for them, and then only those past the loosest of its thresholds (`Past`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
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


Values = dict[str, tuple[float, Where]]
"""subject → (value, where)."""
Figures = dict[str, Values]
"""metric → subject → (value, where)."""
NODE_FIGURES = {NOT_READY, GPUS_MISSING, AGENT_SILENT, INSPECTION_FAILED}


Gpu = tuple[str, dict[str, Any], Where]
"""A GPU's subject, latest sample and where it belongs."""
NUMBER = (int, float)


@dataclass(frozen=True, slots=True)
class Past:
    """The values a rule could find breaching: at least `at_least` or at most `at_most`."""

    at_least: float = math.inf
    at_most: float = -math.inf

    def holds(self, value: float) -> bool:
        return value >= self.at_least or value <= self.at_most


@dataclass(frozen=True, slots=True)
class Reading:
    """What a round read: the portal's node and job figures, and the GPUs' latest samples as
    they came from the cache (their fields become values in `values`)."""

    figures: Figures
    gpus: list[Gpu] = field(default_factory=list)

    def values(self, metric: str, past: Past | None = None) -> Values:
        """`metric`'s values per subject; with `past`, only those it holds for."""
        if metric in self.figures:
            values = self.figures[metric]
            if past is None:
                return values
            return {subject: vw for subject, vw in values.items() if past.holds(vw[0])}
        if metric == THROTTLED:
            return self._throttled(past)
        if metric in NOT_METRICS or metric in PORTAL_FIGURES:
            return {}
        if past is None:
            return {
                subject: (float(raw), where)
                for subject, sample, where in self.gpus
                if isinstance(raw := sample.get(metric), NUMBER)
            }
        at_least, at_most = past.at_least, past.at_most
        return {
            subject: (value, where)
            for subject, sample, where in self.gpus
            if isinstance(raw := sample.get(metric), NUMBER)
            and ((value := float(raw)) >= at_least or value <= at_most)
        }

    def _throttled(self, past: Past | None) -> Values:
        found: Values = {}
        for subject, sample, where in self.gpus:
            reasons = sample.get(THROTTLE_REASONS)
            if isinstance(reasons, int):
                value = 1.0 if reasons & THROTTLE_MASK else 0.0
                if past is None or past.holds(value):
                    found[subject] = (value, where)
        return found

    def metrics(self) -> set[str]:
        """Every metric that has a value."""
        named = set(self.figures)
        for _, sample, _ in self.gpus:
            named.update(sample)
            if isinstance(sample.get(THROTTLE_REASONS), int):
                named.add(THROTTLED)
        return named - NOT_METRICS


def gather(now: datetime, metrics: Collection[str] | None = None) -> Figures:
    """Every value of these metrics (of all, by default) per subject."""
    reading = read(now, metrics)
    wanted = reading.metrics() if metrics is None else metrics
    figures = {metric: reading.values(metric) for metric in wanted}
    return {metric: values for metric, values in figures.items() if values}


def read(now: datetime, metrics: Collection[str] | None = None) -> Reading:
    """What the values of these metrics (of all, by default) come from: queries and cache
    reads only for the figures named (no samples for the node figures alone, no queued jobs
    without JOB_PENDING)."""

    def wants(*names: str) -> bool:
        return metrics is None or any(name in metrics for name in names)

    per_gpu = metrics is None or any(m not in PORTAL_FIGURES or m == THROTTLED for m in metrics)
    reading = Reading({})
    if per_gpu or wants(*NODE_FIGURES):
        _read_nodes(reading, now, metrics, per_gpu)
    if wants(JOB_PENDING):
        _add_queued(reading.figures, now)
    return reading


def _read_nodes(
    reading: Reading, now: datetime, metrics: Collection[str] | None, per_gpu: bool
) -> None:
    figures = reading.figures
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
    wanted = NODE_FIGURES if metrics is None else NODE_FIGURES.intersection(metrics)
    silent = AGENT_SILENT in wanted
    samples = hot.of_nodes(node_id for node_id, *_ in nodes) if per_gpu or silent else {}
    inspected = failed_checks() if INSPECTION_FAILED in wanted else {}
    jobs = _jobs() if per_gpu else {}
    for node_id, name, gpu_type, ready, capacity, allocatable, token, unhealthy in nodes:
        where = Where(node_id, name, gpu_type or "")
        if NOT_READY in wanted:
            figures.setdefault(NOT_READY, {})[name] = (0.0 if ready else 1.0, where)
        if GPUS_MISSING in wanted:
            missing = capacity - usable_gpus(capacity, allocatable, unhealthy)
            figures.setdefault(GPUS_MISSING, {})[name] = (float(missing), where)
        if node_id in inspected:
            figures.setdefault(INSPECTION_FAILED, {})[name] = (float(inspected[node_id]), where)
        latest = samples.get(node_id, {})
        if silent and latest:
            newest = max(s.get("at", 0) for s in latest.values())
            figures.setdefault(AGENT_SILENT, {})[name] = (max(0.0, now.timestamp() - newest), where)
        elif silent and token:  # an agent was given a token and has said nothing this past hour
            figures.setdefault(AGENT_SILENT, {})[name] = (float(hot.LATEST_SECONDS), where)
        if per_gpu:
            wheres = {None: where}  # a node's GPUs under one job share where they belong
            for index, sample in latest.items():
                job_id = sample.get("job_id")
                if job_id not in wheres:
                    wheres[job_id] = _gpu_where(where, job_id, jobs)
                reading.gpus.append((f"{name}/gpu{index}", sample, wheres[job_id]))


def _jobs() -> dict[int, tuple[int, str]]:
    """{job id: (team id, team slug)} of the jobs holding GPUs."""
    rows = Job.unscoped.filter(state__in=HOLDING_STATES).values_list("id", "team_id", "team__slug")
    return {job_id: (team_id, slug) for job_id, team_id, slug in rows}


def _gpu_where(node: Where, job_id: Any, jobs: dict[int, tuple[int, str]]) -> Where:
    if job_id is None or job_id not in jobs:
        return node
    team_id, slug = jobs[job_id]
    return Where(node.node_id, node.node, node.gpu_type, team_id, slug, job_id)


def _add_queued(figures: Figures, now: datetime) -> None:
    queued = Job.unscoped.filter(state=State.QUEUED).values_list(
        "id", "team_id", "team__slug", "gpu_type__name", "submitted_at"
    )
    for job_id, team_id, slug, gpu_type, submitted_at in queued:
        where = Where(gpu_type=gpu_type, team_id=team_id, team=slug, job_id=job_id)
        waited = (now - submitted_at).total_seconds()
        figures.setdefault(JOB_PENDING, {})[f"job {job_id}"] = (waited, where)
