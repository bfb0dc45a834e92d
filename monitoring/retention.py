"""Pruning of minute roll-ups older than `METRICS_RETENTION_DAYS` (`monitoring.tasks`)."""

from __future__ import annotations

import time

from django.conf import settings

from monitoring.models import GpuMinute


def prune_rollups(now: float | None = None) -> int:
    """Delete roll-ups older than the retention; return how many went. Job totals stay."""
    now = time.time() if now is None else now
    cutoff = int(now) - settings.METRICS_RETENTION_DAYS * 86400
    deleted, _ = GpuMinute.objects.filter(minute__lt=cutoff).delete()
    return deleted
