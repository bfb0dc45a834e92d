"""Redis away: the cache and the channel layer carry on without it, and say so once a minute.

Redis holds nothing the portal cannot do without for a while (cache entries, throttle counts,
live messages); the database holds the truth. So when a call cannot reach Redis, its adapter
(base.cache, base.channel_layer) serves without it instead of failing the request, skips
Redis for `RETRY_S`, then tries again: Redis coming back is noticed without a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import redis.exceptions

logger = logging.getLogger(__name__)

RETRY_S = 5.0  # after a failed call, how long Redis is taken for away before the next try
WARN_EVERY_S = 60.0  # while away, a warning this often at most, not one per request

# What says Redis cannot be reached (refused, reset, timed out), not that a command was wrong.
UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class Outage:
    """Whether Redis (as one adapter reaches it) is taken for away; the clock is injectable
    so that tests move time instead of waiting."""

    def __init__(
        self, what: str, meanwhile: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.what = what
        self.meanwhile = meanwhile
        self.clock = clock
        self.away = False
        self._retry_at = 0.0
        self._warned_at = 0.0

    def should_try(self) -> bool:
        """Whether to call Redis now: always while it answers, once per `RETRY_S` while away."""
        return not self.away or self.clock() >= self._retry_at

    def failed(self, exc: BaseException) -> None:
        now = self.clock()
        if not self.away or now - self._warned_at >= WARN_EVERY_S:
            logger.warning(
                "%s unreachable (%s): %s; trying again every %s s",
                self.what,
                exc,
                self.meanwhile,
                RETRY_S,
            )
            self._warned_at = now
        self.away, self._retry_at = True, now + RETRY_S

    def reached(self) -> None:
        if self.away:
            self.away = False
            logger.warning("%s reachable again", self.what)


_shared: dict[str, Outage] = {}


def shared(key: str, what: str, meanwhile: str) -> Outage:
    """The process's one Outage for `key` (e.g. a cache's location): Django makes a cache
    object per thread, and all of them should find Redis away, or back, together."""
    return _shared.setdefault(key, Outage(what, meanwhile))
