"""A heap of callbacks due at simulated times, run from the simulation's tick."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class Timers:
    """`at(when, fn)`; `run_due(now)` calls everything due, in time order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def at(self, when: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (when, next(self._seq), fn))

    def run_due(self, now: float) -> None:
        while self._heap and self._heap[0][0] <= now:
            _, _, fn = heapq.heappop(self._heap)
            fn()
