"""A thread pool that runs its waiting calls lowest rank first, not in the order they came.

The controller's creates and deletes wait for one of its threads (`cluster.kubecalls`), often
hundreds at once. An admitted job holds its GPUs while its create waits, so a large job's create
must not wait behind many small ones; and a preempted job's delete frees the node that admitted
jobs' pods wait for, so deletes go first.

Its threads are daemons: calls still waiting when the process ends are lost, as they would be if
it were killed, and the controller's reconciliation redoes them (it creates an admitted job's
missing Job and deletes a Job the database no longer expects).
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

_STOP = float("inf")  # ranks after every call, so those already waiting still run


@dataclass(order=True)
class _Call:
    rank: tuple[float, ...]
    seq: int  # equal ranks run in the order they came
    fn: Callable[..., Any] = field(compare=False)
    args: tuple[Any, ...] = field(compare=False)
    future: Future[Any] = field(compare=False)


class RankedPool:
    def __init__(self, workers: int, name: str) -> None:
        self.workers, self.name = workers, name
        self._waiting: queue.PriorityQueue[_Call] = queue.PriorityQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._closed = False

    def submit(self, rank: tuple[float, ...], fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run `fn(*args)` on a pool thread once no call of lower rank waits."""
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name} pool is shut down")
            self._waiting.put(_Call(rank, next(self._seq), fn, args, future))
            if len(self._threads) < self.workers:  # started as needed, up to `workers`
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        while True:
            call = self._waiting.get()
            if call.rank == (_STOP,):
                return
            if not call.future.set_running_or_notify_cancel():
                continue
            try:
                result = call.fn(*call.args)
            except BaseException as exc:
                call.future.set_exception(exc)
            else:
                call.future.set_result(result)

    def shutdown(self, wait: bool = True) -> None:
        """No new calls; those waiting still run. With `wait`, return once they have."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._waiting.put(_Call((_STOP,), next(self._seq), lambda: None, (), Future()))
        if wait:
            for thread in threads:
                thread.join()
