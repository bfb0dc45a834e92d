"""Celery tasks of billing. The controller, the only clock, enqueues them (PERIODIC_TASKS)."""

from __future__ import annotations

from celery import shared_task

from billing.statements import finalise_last_month


@shared_task(autoretry_for=(Exception,), retry_backoff=True, max_retries=5)
def finalise_statements() -> int:
    """Write last month's final statements, once its month is over: idempotent, so it may run
    every hour and after any retry."""
    return finalise_last_month()
