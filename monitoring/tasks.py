"""Celery tasks of monitoring. The controller, the only clock, decides when they are due."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone, translation

from cluster import connect
from monitoring.inspections import inspect
from monitoring.retention import prune_rollups


@shared_task(autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def prune_old_rollups() -> int:
    """Delete minute roll-ups past METRICS_RETENTION_DAYS: a large delete, kept off the
    controller's loop and retried where the database was away."""
    return prune_rollups()


@shared_task
def inspect_nodes(requested_by: int | None = None) -> int:
    """One health inspection of every node (the schedule's, or the admin's with that id);
    returns the run's id. Not retried: the next period's run is the retry. Its report is
    written in the portal's language, whoever asked (eagerly, in their request's)."""
    user = User.objects.filter(pk=requested_by, is_staff=True).first() if requested_by else None
    with translation.override(settings.LANGUAGE_CODE):
        return inspect(timezone.now(), backend=connect.backend(), requested_by=user).pk
