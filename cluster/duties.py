"""The controller's periodic duties, in one table: what, how often, and why.

The loop walks the table once a turn, in order, against an injectable monotonic clock, and runs
each duty whose period has passed since it last ran to its end (or, for one with `sooner`,
earlier when that says so). A duty that raises has not run: the next turn tries it again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from celery import current_app
from django.conf import settings

log = logging.getLogger(__name__)

Clock = Callable[[], float]
"""Monotonic seconds: `time.monotonic` in production, a clock the test steps in tests."""


@dataclass
class Duty:
    name: str
    every_s: float
    run: Callable[[], object]
    why: str
    sooner: Callable[[], bool] | None = None
    """Also due before its period has passed when this says so (something changed)."""
    last: float = -math.inf

    def due(self, now: float) -> bool:
        if now - self.last >= self.every_s:
            return True
        return self.sooner is not None and self.sooner()


class Duties:
    """The table: duties in the order a turn runs them."""

    def __init__(self, clock: Clock, duties: list[Duty]) -> None:
        self.clock = clock
        self.table = duties

    def __iter__(self) -> Iterator[Duty]:
        return iter(self.table)

    def __getitem__(self, name: str) -> Duty:
        return next(duty for duty in self.table if duty.name == name)

    def run_due(self) -> None:
        for duty in self.table:
            now = self.clock()
            if duty.due(now):
                duty.run()
                duty.last = now

    def ran(self, *names: str) -> None:
        """These duties were just done by other means (taking the lead lists and renews)."""
        now = self.clock()
        for name in names:
            self[name].last = now

    def all_due(self) -> None:
        """Everything due at once: a new leader does every duty on its first turn."""
        for duty in self.table:
            duty.last = -math.inf


def enqueue(task_name: str) -> None:
    """Hand a Celery task to the workers (run at once where tasks run eagerly)."""
    try:
        current_app.tasks[task_name].delay()
    except Exception:  # a task failing eagerly, or a broker away: the next period tries again
        log.exception("enqueueing %s", task_name)


def periodic_tasks() -> list[Duty]:
    """One duty per task of `settings.PERIODIC_TASKS` ({task name: seconds}), as Celery beat
    would run them: there is no beat, the leading controller is the only clock."""
    current_app.loader.import_default_modules()  # the app's autodiscovery registers the tasks
    return [
        Duty(name, every_s, partial(enqueue, name), "scheduled by PERIODIC_TASKS")
        for name, every_s in settings.PERIODIC_TASKS.items()
    ]
