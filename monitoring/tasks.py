"""Celery tasks of monitoring. The controller, the only clock, decides when they are due."""

from __future__ import annotations

from celery import shared_task

from monitoring.retention import prune_rollups


@shared_task(autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def prune_old_rollups() -> int:
    """Delete minute roll-ups past METRICS_RETENTION_DAYS: a large delete, kept off the
    controller's loop and retried where the database was away."""
    return prune_rollups()
