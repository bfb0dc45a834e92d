"""Celery task of the quota what-if: a replay may take minutes, away from the request."""

from __future__ import annotations

from celery import shared_task

from cluster.whatif_run import run


@shared_task
def run_whatif(whatif_id: int) -> str | None:
    """Replay what-if `whatif_id` (`cluster.whatif_run.run`): a done one is not run again, a
    failure is kept on its row. Not retried: a replay that failed on its inputs fails again."""
    state = run(whatif_id)
    return None if state is None else state.value
