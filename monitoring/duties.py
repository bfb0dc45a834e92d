"""monitoring's rows in the leading controller's duty table (`cluster.controller.add_duties`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cluster.duties import Duty
from monitoring.alerts.round import evaluate_alerts
from monitoring.faults import FaultLoop

if TYPE_CHECKING:
    from cluster.controller import Controller

FAULTS_EVERY_S = 0.5
"""New Xids are acted on within about this long of their arrival (goal: cordoned within 10 s)."""
COUNTERS_EVERY_S = 10.0
"""ECC and row-remap counters are read from every GPU's latest sample this often."""
ALERTS_EVERY_S = 5.0
"""Alert rules are evaluated this often: well under the shortest duration a rule holds."""


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
    ]


def _requeued(controller: Controller, job_ids: list[int]) -> None:
    controller.scheduling.queued.returned(job_ids)
    controller.scheduling.want()
