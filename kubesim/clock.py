"""Simulated time: the whole simulation reads one clock, so tests drive it and demos speed it up.

Times are POSIX seconds (floats). `ScaledClock` runs `speed` times faster than the wall clock from
the moment it is created; `ManualClock` only moves when a test calls `advance`.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime
from functools import lru_cache
from typing import Protocol


class Clock(Protocol):
    """Anything with a `now()` in simulated POSIX seconds."""

    def now(self) -> float: ...


class ScaledClock:
    """Wall-clock time, sped up by `speed` from the moment of creation."""

    def __init__(self, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError(f"speed: must be positive, got {speed}")
        self.speed = speed
        self._origin_wall = time.time()
        self._origin_mono = time.monotonic()

    def now(self) -> float:
        return self._origin_wall + (time.monotonic() - self._origin_mono) * self.speed


class ManualClock:
    """A clock that stands still until `advance` is called (thread-safe)."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


def rfc3339(ts: float) -> str:
    """Kubernetes' second-precision timestamp format."""
    return _rfc3339_second(math.floor(ts))


@lru_cache(maxsize=256)  # every controller stamps "now": the same few seconds, over and over
def _rfc3339_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    """Inverse of `rfc3339` (also reads client-sent fractional timestamps)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
