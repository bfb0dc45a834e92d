"""`RankedPool`: threads that run the lowest-ranked waiting call first.

The controller creates and deletes Kubernetes Jobs from a few threads. A cycle admits hundreds of
jobs at once, and a GPU counts as held from the job's admission, so a create waiting its turn
holds its GPUs for nothing. In the Kueue replay, small jobs waited about a second for their
create; a large job waiting behind them idled twenty GPUs. Ranking each call by the GPUs it
frees or starts (`Controller`) spends the waiting where it holds the fewest GPUs.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class RankedPool:
    def __init__(self, workers: int, name: str) -> None:
        self._calls: queue.PriorityQueue[tuple[float, int, Any]] = queue.PriorityQueue()
        self._order = itertools.count()  # equal ranks run in the order they came
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, rank: float = 0.0) -> Future[Any]:
        """Run `fn(*args)` on a worker, after every waiting call of a lower rank."""
        if self._closed:
            raise RuntimeError("the pool is shut down")
        future: Future[Any] = Future()
        self._calls.put((rank, next(self._order), (future, fn, args)))
        return future

    def shutdown(self, wait: bool = True) -> None:
        """Run what is waiting, then stop the workers."""
        self._closed = True
        for _ in self._threads:
            self._calls.put((float("inf"), next(self._order), None))
        if wait:
            for thread in self._threads:
                thread.join()

    def _work(self) -> None:
        while True:
            _, _, call = self._calls.get()
            if call is None:
                return
            future, fn, args = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)
            else:
                future.set_result(result)
