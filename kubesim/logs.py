"""Synthetic training logs: a pure function of a container run and the time, so they grow as the
pod runs and `tailLines`, `sinceSeconds` and `previous` need no stored text."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

LINE_INTERVAL_S = 1.0


@dataclass
class Run:
    """One run of a pod's containers: when it started, when it ends, how."""

    started: float
    ends: float | None  # None: runs until killed
    exit_code: int
    finished: float | None = None
    notes: list[tuple[float, str]] = field(default_factory=list)
    """What the kubelet did to the running container (a downward API file changed, SIGTERM),
    written into its log as the container would report it."""


def _noise(seed: str, step: int) -> float:
    digest = hashlib.blake2b(f"{seed}:{step}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") / 2**32 - 0.5


def _line(seed: str, step: int, gpus: int) -> str:
    loss = 2.5 * math.exp(-step / 400) + 0.15 + 0.03 * _noise(seed, step)
    rate = max(gpus, 1) * 410.0 * (1 + 0.05 * _noise(seed + "r", step))
    return f"step={step} loss={loss:.4f} samples/s={rate:.1f} lr=3.0e-04"


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def lines(
    seed: str,
    container: str,
    node: str,
    gpus: list[int],
    run: Run,
    now: float,
    after: float | None = None,
) -> Iterator[tuple[float, str]]:
    """(time, text) of every line written by `now`, or only of those written after `after`."""
    if after is None or run.started > after:
        yield (
            run.started,
            f"kubesim: container {container} started on {node}, GPUs [{','.join(map(str, gpus))}]",
        )
    end = min(now, run.finished if run.finished is not None else now)
    steps = int((end - run.started) / LINE_INTERVAL_S)
    first = 1 if after is None else max(1, int((after - run.started) / LINE_INTERVAL_S))
    moments = ((run.started + step * LINE_INTERVAL_S, step) for step in range(first, steps + 1))
    written = [
        (at, _line(seed, step, len(gpus))) for at, step in moments if after is None or at > after
    ]
    written += [(at, n) for at, n in run.notes if at <= end and (after is None or at > after)]
    written.sort(key=lambda entry: entry[0])  # stable: a note after the step of its moment
    yield from written
    if run.finished is not None and run.finished <= now and (after is None or run.finished > after):
        verdict = (
            "training finished"
            if run.exit_code == 0
            else f"error: exiting with code {run.exit_code}"
        )
        yield run.finished, verdict


def next_line_at(run: Run, after: float) -> float:
    """When the run writes its next line after `after` (a step, or its end if sooner)."""
    step = max(0, int((after - run.started) / LINE_INTERVAL_S)) + 1
    due = run.started + step * LINE_INTERVAL_S
    return run.ends if run.ends is not None and after < run.ends < due else due


def render(
    entries: list[tuple[float, str]], tail: int | None, since: float | None, timestamps: bool
) -> list[str]:
    chosen = [e for e in entries if since is None or e[0] >= since]
    if tail is not None:
        chosen = chosen[-tail:] if tail > 0 else []
    return [f"{_stamp(t)} {text}\n" if timestamps else f"{text}\n" for t, text in chosen]
