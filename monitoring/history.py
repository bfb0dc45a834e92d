"""A job's GPU history from the minute roll-ups, its lifetime totals, and its GPUs' latest."""

from __future__ import annotations

import time
from typing import Any

from jobs.models import Job
from monitoring import hot
from monitoring.models import GpuMinute, JobMetrics


def _totals(job: Job) -> dict[str, float] | None:
    metrics = JobMetrics.objects.for_team(job.team).filter(job=job).first()
    if metrics is None:
        return None
    return {
        "util_average": round(metrics.util_average, 2),
        "util_peak": metrics.util_peak,
        "fb_used_peak": metrics.fb_used_peak,
        "energy_joules": round(metrics.energy_joules, 1),
        "gpu_hours": round(metrics.gpu_hours, 4),
    }


def job_history(job: Job, hours: int) -> dict[str, Any]:
    """Per GPU: columns of minute averages and peaks (for uPlot), and the newest sample."""
    since = int(time.time()) // 60 * 60 - hours * 3600
    minutes = (
        GpuMinute.objects.filter(job=job, minute__gte=since)
        .order_by("minute")
        .values_list(
            "gpu__node_id",
            "gpu__node__name",
            "gpu__index",
            "minute",
            "samples",
            "util_sum",
            "fb_used_max",
            "temp_max",
            "power_sum",
        )
    )
    series: dict[tuple[int, str, int], dict[str, list[Any]]] = {}
    for node_id, node, index, minute, samples, util, fb, temp, power in minutes:
        columns = series.setdefault(
            (node_id, node, index), {"t": [], "util": [], "fb_used": [], "temp": [], "power": []}
        )
        columns["t"].append(minute)
        columns["util"].append(round(util / samples, 1) if samples else None)
        columns["fb_used"].append(fb)
        columns["temp"].append(temp)
        columns["power"].append(round(power / samples, 1) if samples else None)
    latest = hot.latest((node_id, index) for node_id, _, index in series)
    gpus = [
        {"node": node, "index": index, "history": columns, "latest": latest.get((node_id, index))}
        for (node_id, node, index), columns in sorted(series.items(), key=lambda kv: kv[0][1:])
    ]
    return {"job_id": job.pk, "totals": _totals(job), "gpus": gpus}
