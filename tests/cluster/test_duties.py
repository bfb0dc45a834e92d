"""The controller's table of duties, on a clock the test steps."""

from __future__ import annotations

from typing import cast

import pytest
from celery import current_app

from cluster.backend import ClusterBackend
from cluster.controller import Controller, Timing
from cluster.duties import Duties, Duty, periodic_tasks
from tests.cluster.conftest import SteppedClock

PRUNE = "monitoring.tasks.prune_old_rollups"


def test_a_duty_runs_once_per_period_and_sooner_when_something_asks() -> None:
    clock, runs, wanted = SteppedClock(), [], [False]
    duties = Duties(
        clock, [Duty("d", 10.0, lambda: runs.append(clock()), "why", sooner=lambda: wanted[0])]
    )
    duties.run_due()
    clock.advance(9.9)
    duties.run_due()
    assert runs == [1000.0]
    clock.advance(0.1)
    duties.run_due()
    assert runs == [1000.0, 1010.0]
    wanted[0] = True
    duties.run_due()
    assert runs == [1000.0, 1010.0, 1010.0]


def test_a_duty_that_failed_is_tried_again_on_the_next_turn() -> None:
    clock, tries = SteppedClock(), []

    def flaky() -> None:
        tries.append(clock())
        if len(tries) == 1:
            raise ConnectionError("away")

    duties = Duties(clock, [Duty("d", 60.0, flaky, "why")])
    with pytest.raises(ConnectionError):
        duties.run_due()
    clock.advance(0.1)
    duties.run_due()
    duties.run_due()
    assert tries == [1000.0, 1000.1]


@pytest.mark.django_db
def test_the_rollup_pruning_runs_once_an_hour(monkeypatch: pytest.MonkeyPatch) -> None:
    from monitoring import tasks

    pruned: list[int] = []

    def prune() -> int:
        pruned.append(1)
        return 0

    monkeypatch.setattr(tasks, "prune_rollups", prune)
    monkeypatch.setitem(current_app.conf, "CELERY_TASK_ALWAYS_EAGER", True)  # as without a broker
    clock = SteppedClock()
    duties = Duties(clock, periodic_tasks())  # enqueued; run at once (eager Celery)

    duties.run_due()
    assert pruned == [1]
    clock.advance(3599.0)
    duties.run_due()
    assert pruned == [1]
    clock.advance(1.0)
    duties.run_due()
    assert pruned == [1, 1]


def test_the_controllers_table_holds_its_duties_in_turn_order() -> None:
    controller = Controller(cast(ClusterBackend, object()), timing=Timing(), clock=SteppedClock())
    names = [duty.name for duty in controller.duties]
    assert names[:2] == ["renew", "reports"]  # the lease first: a stale leader does nothing
    assert names.index("resync") < names.index("schedule") < names.index("stops")
    assert controller.duties[PRUNE].every_s == 3600
