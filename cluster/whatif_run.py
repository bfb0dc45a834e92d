"""Run one what-if (`cluster.whatif`) from the database: read the window's jobs, the nodes and
the policy tables, replay them as they are and as asked, and keep progress and figures on the
row. Called by the Celery task `cluster.whatif_tasks.run_whatif`."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from base.errors import FieldErrors
from cluster.models import Node, WhatIf, WhatIfState
from cluster.snapshot import PolicyTables
from cluster.whatif import SubmittedJob, changed_trace, compare, trace_jobs
from jobs.models import Job
from quotas.models import GpuType
from scheduler import NodeState, Policy, PolicyConfig, QuotaInfo
from scheduler.simulate import Trace

logger = logging.getLogger(__name__)

_JOB = (
    "id",
    "team__slug",
    "owner__username",
    "gpu_type__name",
    "nodes",
    "gpus_per_node",
    "image",
    "submitted_at",
    "started_at",
    "finished_at",
    "max_runtime",
    "queue__priority",
    "queue__preemptible",
)


def _ts(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def submitted_in(start: datetime, end: datetime) -> Any:
    """The jobs submitted in [start, end), every team's."""
    return Job.unscoped.filter(submitted_at__gte=start, submitted_at__lt=end)


def too_many(count: int) -> FieldErrors:
    message = _(
        "%(count)d jobs were submitted in this window; a what-if replays at most %(most)d "
        "(WHATIF_MAX_JOBS): choose a shorter window"
    )
    return FieldErrors(
        {"window_start": message % {"count": count, "most": settings.WHATIF_MAX_JOBS}}
    )


def _job(row: tuple[Any, ...]) -> SubmittedJob:
    job_id, team, member, gpu_type, nodes, gpus, image, submitted, started, finished, *rest = row
    limit, priority, preemptible = rest
    return SubmittedJob(
        job_id,
        team,
        member,
        gpu_type,
        nodes,
        gpus,
        image,
        submitted=submitted.timestamp(),
        started=_ts(started),
        finished=_ts(finished),
        runtime_limit_s=float(limit),
        priority=priority,
        preemptible=preemptible,
    )


def read_jobs(start: datetime, end: datetime) -> list[SubmittedJob]:
    """The window's submissions in submission order; FieldErrors past WHATIF_MAX_JOBS."""
    most = settings.WHATIF_MAX_JOBS
    rows = submitted_in(start, end).order_by("submitted_at", "id").values_list(*_JOB)
    jobs = [_job(row) for row in rows[: most + 1].iterator(chunk_size=5000)]
    if len(jobs) > most:
        raise too_many(submitted_in(start, end).count())
    return jobs


def read_nodes() -> tuple[NodeState, ...]:
    """Every node with a GPU type, at the GPUs it has installed (`cluster.whatif`)."""
    rows = Node.objects.filter(gpu_type__isnull=False).values_list(
        "name", "gpu_type__name", "gpu_capacity", "gpu_allocatable", "rack", "nvlink_domain"
    )
    nodes = []
    for name, gpu_type, capacity, allocatable, rack, nvlink in rows:
        installed = max(capacity, allocatable)
        labels = {"rack": rack, "nvlink_domain": nvlink}
        nodes.append(NodeState(name, gpu_type, installed, installed, labels))
    return tuple(nodes)


def node_sizes() -> dict[str, int]:
    """GPUs one node of each type holds: what an added node gets."""
    return dict(GpuType.objects.values_list("name", "gpus_per_node"))


def quota_changes(changes: dict[str, Any]) -> list[QuotaInfo]:
    return [
        QuotaInfo(c["team"], c["gpu_type"], c["guaranteed"], c["limit"])
        for c in changes.get("quotas", [])
    ]


def replay(whatif: WhatIf, progress: Any) -> dict[str, Any]:
    """Both scenarios' figures, side by side (`cluster.whatif.compare`)."""
    start, end = whatif.window_start, whatif.window_end
    jobs = trace_jobs(read_jobs(start, end), end.timestamp())
    teams, quotas, caps = PolicyTables().current()
    trace = Trace(jobs, read_nodes(), teams, quotas, caps)
    changed = changed_trace(
        trace, quota_changes(whatif.changes), whatif.changes.get("gpus", {}), node_sizes()
    )
    progress(10)
    config = PolicyConfig(policy=Policy(whatif.policy))
    return compare(trace, changed, config, (start.timestamp(), end.timestamp()), progress)


def _update(whatif_id: int, **fields: Any) -> None:
    # One UPDATE of the row, committed at once: the result page reads it while this runs.
    WhatIf.objects.filter(pk=whatif_id).update(**fields)


def run(whatif_id: int) -> WhatIfState | None:
    """Run the what-if unless it is done already (a task delivered twice); a failure is kept on
    the row, not raised: nothing retries a replay that failed on its inputs."""
    whatif = WhatIf.objects.filter(pk=whatif_id).first()
    if whatif is None or whatif.state == WhatIfState.DONE:
        return None
    _update(whatif_id, state=WhatIfState.RUNNING, progress=0, error="")
    try:
        results = replay(whatif, lambda percent: _update(whatif_id, progress=percent))
    except FieldErrors as exc:
        return _fail(whatif_id, "; ".join(f"{k}: {v}" for k, v in exc.errors.items()))
    except Exception:
        logger.exception("what-if %s failed", whatif_id)
        return _fail(whatif_id, _("The replay failed; the logs have the details."))
    _update(
        whatif_id,
        state=WhatIfState.DONE,
        progress=100,
        results=results,
        finished_at=timezone.now(),
    )
    return WhatIfState.DONE


def _fail(whatif_id: int, error: str) -> WhatIfState:
    _update(whatif_id, state=WhatIfState.FAILED, error=error, finished_at=timezone.now())
    return WhatIfState.FAILED
