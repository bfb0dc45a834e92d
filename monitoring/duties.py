"""monitoring's rows in the leading controller's duty table (`cluster.controller.add_duties`)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from django.conf import settings

from cluster.duties import Duty, enqueue
from monitoring.alerts.round import evaluate_alerts
from monitoring.faults import FaultLoop
from monitoring.idle import check_idle

if TYPE_CHECKING:
    from cluster.controller import Controller

FAULTS_EVERY_S = 0.5
"""New Xids are acted on within about this long of their arrival (goal: cordoned within 10 s)."""
COUNTERS_EVERY_S = 10.0
"""ECC and row-remap counters are read from every GPU's latest sample this often."""
ALERTS_EVERY_S = 5.0
"""Alert rules are evaluated this often: well under the shortest duration a rule holds."""
IDLE_EVERY_S = 60.0
"""Idle jobs are looked for this often: the roll-ups they are judged on are by the minute."""
INSPECT_TASK = "monitoring.tasks.inspect_nodes"
"""Run every INSPECTION_EVERY_MINUTES; a new leader runs one on its first turn."""


def controller_duties(controller: Controller) -> list[Duty]:
    loop = FaultLoop(
        backend=controller.backend,
        writing=controller.writing,
        delete_on_commit=controller.kube.delete_on_commit,
        requeued=lambda job_ids: _requeued(controller, job_ids),
    )
    return [
        Duty("faults", FAULTS_EVERY_S, loop.run, "Xids: classify, cordon, requeue, incident"),
        Duty("fault counters", COUNTERS_EVERY_S, loop.run_counters, "ECC and remap counters"),
        Duty("alerts", ALERTS_EVERY_S, evaluate_alerts, "alert rules over the latest samples"),
        Duty(
            "idle jobs",
            IDLE_EVERY_S,
            partial(check_idle, writing=controller.writing),
            "warn owners of idle jobs; stop them where the team's policy says so",
        ),
        Duty(
            "inspection",
            settings.INSPECTION_EVERY_MINUTES * 60,
            partial(enqueue, INSPECT_TASK),
            "every node's health inspection, in a Celery task (monitoring.inspections)",
        ),
    ]


def _requeued(controller: Controller, job_ids: list[int]) -> None:
    controller.scheduling.queued.returned(job_ids)
    controller.scheduling.want()
