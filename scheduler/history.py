"""Runtimes learnt from history, as backfilling schedulers predict them from a user's past jobs
instead of trusting the runtime limit (users overstate limits by 1.5-4 x, and most jobs end far
sooner).

A prediction comes from the last `WINDOW` runs of the narrowest key that has `MIN_SAMPLES`: the
member's jobs of the same image and size, else of the same size, else all the member's jobs;
capped by the job's limit. Two predictors are kept, and each key uses the one that would have
been nearer on its own runs (leave one out): the mean runtime (members whose jobs run about as
long whatever limit they ask), or the job's limit times the mean share of their limits the runs
used (members who size their limits to the job). The mean, not the median: an estimated start
adds up many jobs' ends, and with runtimes as skewed as real ones the median of each
understates the sum (medians were measured worse: docs/decisions/0010).
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


class _Runs:
    """One key's last runs, and the predictor that serves it (chosen again after each run)."""

    def __init__(self) -> None:
        self.runtimes: deque[float] = deque(maxlen=WINDOW)
        self.limits: deque[float] = deque(maxlen=WINDOW)
        self._fit: tuple[bool, float] | None = None
        """(by share of the limit?, the mean share or the mean runtime)"""

    def add(self, runtime_s: float, limit_s: float) -> None:
        self.runtimes.append(runtime_s)
        self.limits.append(max(limit_s, runtime_s, 1e-9))  # a share is at most 1, never x/0
        self._fit = None

    def predict(self, limit_s: float) -> float:
        if self._fit is None:
            self._fit = _fit(self.runtimes, self.limits)
        by_share, mean = self._fit
        return limit_s * mean if by_share else mean


def _fit(runtimes: deque[float], limits: deque[float]) -> tuple[bool, float]:
    """The mean share of the limit if it would have predicted these runs better than the mean
    runtime, each run predicted from the others; else the mean runtime."""
    others = len(runtimes) - 1
    if others < 1:
        return False, sum(runtimes) / max(len(runtimes), 1)
    shares = [runtime / limit for runtime, limit in zip(runtimes, limits, strict=True)]
    runtime_total, share_total = sum(runtimes), sum(shares)
    by_mean = by_share = 0.0
    for runtime, limit, share in zip(runtimes, limits, shares, strict=True):
        by_mean += abs(runtime - (runtime_total - runtime) / others)
        by_share += abs(runtime - limit * (share_total - share) / others)
    if by_share < by_mean:
        return True, share_total / len(shares)
    return False, runtime_total / len(runtimes)


class RuntimeHistory:
    def __init__(self) -> None:
        self._runs: dict[Key, _Runs] = {}

    def record(self, job: JobRequest, runtime_s: float) -> None:
        """A run of `job` that ended by itself after `runtime_s` (not one cut short)."""
        self.record_run(
            job.member, job.image, job.nodes, job.gpus_per_node, runtime_s, job.runtime_limit_s
        )

    def record_run(
        self,
        member: str,
        image: str,
        nodes: int,
        gpus_per_node: int,
        runtime_s: float,
        limit_s: float,
    ) -> None:
        """`record` from a finished job's fields (the controller reads them as rows)."""
        for key in _keys(member, image, nodes, gpus_per_node):
            runs = self._runs.get(key)
            if runs is None:
                runs = self._runs[key] = _Runs()
            runs.add(runtime_s, limit_s)

    def predict(self, job: JobRequest) -> float | None:
        for key in _keys(job.member, job.image, job.nodes, job.gpus_per_node):
            runs = self._runs.get(key)
            if runs is not None and len(runs.runtimes) >= MIN_SAMPLES:
                return min(runs.predict(job.runtime_limit_s), job.runtime_limit_s)
        return None

    def predicted(self, job: JobRequest) -> JobRequest:
        """`job` with its expected runtime set from this history (unchanged if none)."""
        expected = self.predict(job)
        if expected is None or expected == job.expected_runtime_s:
            return job
        return replace(job, expected_runtime_s=expected)
