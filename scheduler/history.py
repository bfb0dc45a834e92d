"""Runtimes learnt from history, as backfilling schedulers predict them from a user's past jobs
instead of trusting the runtime limit (users overstate limits by 1.5-4 x, and most jobs end far
sooner).

A prediction is the mean of the last `WINDOW` runtimes of the narrowest key that has
`MIN_SAMPLES`: the member's jobs of the same image and size, else of the same size, else all the
member's jobs; capped by the job's limit. The mean, not the median: an estimated start adds up
many jobs' ends, and with runtimes as skewed as real ones the median of each understates the sum.
Estimates use predictions; admission and backfill keep to the limits (a wrong prediction must
never delay a reserved job).
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from scheduler.model import JobRequest

WINDOW = 20
MIN_SAMPLES = 2
Key = tuple[str, ...]


def _keys(member: str, image: str, nodes: int, gpus_per_node: int) -> tuple[Key, ...]:
    size = f"{nodes}x{gpus_per_node}"
    return ((member, image, size), (member, size), (member,))


class RuntimeHistory:
    def __init__(self) -> None:
        self._runs: dict[Key, deque[float]] = {}

    def record(self, job: JobRequest, runtime_s: float) -> None:
        """A run of `job` that ended by itself after `runtime_s` (not one cut short)."""
        self.record_run(job.member, job.image, job.nodes, job.gpus_per_node, runtime_s)

    def record_run(
        self, member: str, image: str, nodes: int, gpus_per_node: int, runtime_s: float
    ) -> None:
        """`record` from a finished job's fields (the controller reads them as rows)."""
        for key in _keys(member, image, nodes, gpus_per_node):
            self._runs.setdefault(key, deque(maxlen=WINDOW)).append(runtime_s)

    def predict(self, job: JobRequest) -> float | None:
        for key in _keys(job.member, job.image, job.nodes, job.gpus_per_node):
            runs = self._runs.get(key)
            if runs is not None and len(runs) >= MIN_SAMPLES:
                return min(sum(runs) / len(runs), job.runtime_limit_s)
        return None

    def predicted(self, job: JobRequest) -> JobRequest:
        """`job` with its expected runtime set from this history (unchanged if none)."""
        expected = self.predict(job)
        if expected is None or expected == job.expected_runtime_s:
            return job
        return replace(job, expected_runtime_s=expected)
