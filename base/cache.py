"""Django's Redis cache, without memcached's key check, serving from this process's memory
while Redis is away; one redis-py client per pool (base.redis_clients).

Every reader of the cache (the API's throttles, the agents' token and inventory lookups, the
latest GPU samples) treats it as a cache: a miss is read from the database. So with Redis away
the calls go to a local-memory cache instead of failing the request (base.outage): the API
keeps serving, throttles count per process, and Redis is used again once it answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache

from base.outage import UNREACHABLE, shared
from base.redis_clients import reuse_clients

# Entries kept in a process while Redis is away: the hot keys of a few thousand nodes and
# tokens; LocMemCache's default of 300 would cull them over and over.
LOCAL_MAX_ENTRIES = 20_000

Timeout = float | None


class RedisCache(DjangoRedisCache):
    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        reuse_clients(self)
        local: dict[str, Any] = {
            key: params[key] for key in ("TIMEOUT", "KEY_PREFIX", "VERSION") if key in params
        }
        local["OPTIONS"] = {"MAX_ENTRIES": LOCAL_MAX_ENTRIES}
        # Django makes a cache object per thread; the name makes them share one memory, and
        # the location one outage, so the process's threads count and notice alike.
        location = server if isinstance(server, str) else ",".join(server)
        self.local = LocMemCache(f"redis-away:{location}", local)
        self.outage = shared(location, "Redis cache", "serving from this process's memory")

    def validate_key(self, key: str) -> None:
        """Redis takes any key. Django's check, for memcached, walks each key character by
        character in Python: a millisecond for a hundred keys."""

    def _either(self, verb: str, *args: Any) -> Any:
        """The cache verb on Redis, or on the local cache while Redis is away."""
        if self.outage.should_try():
            try:
                result = getattr(DjangoRedisCache, verb)(self, *args)
            except UNREACHABLE as exc:
                self.outage.failed(exc)
            else:
                self.outage.reached()
                return result
        return getattr(self.local, verb)(*args)

    def add(
        self, key: Any, value: Any, timeout: Timeout = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        return bool(self._either("add", key, value, timeout, version))

    def get(self, key: Any, default: Any | None = None, version: int | None = None) -> Any:
        return self._either("get", key, default, version)

    def set(
        self, key: Any, value: Any, timeout: Timeout = DEFAULT_TIMEOUT, version: int | None = None
    ) -> None:
        self._either("set", key, value, timeout, version)

    def touch(
        self, key: Any, timeout: Timeout = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        return bool(self._either("touch", key, timeout, version))

    def delete(self, key: Any, version: int | None = None) -> bool:
        return bool(self._either("delete", key, version))

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        found: dict[Any, Any] = self._either("get_many", list(keys), version)
        return found

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return bool(self._either("has_key", key, version))

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        return int(self._either("incr", key, delta, version))

    def set_many(
        self, data: dict[Any, Any], timeout: Timeout = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[Any]:
        failed: list[Any] = self._either("set_many", data, timeout, version)
        return failed

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        self._either("delete_many", list(keys), version)

    def clear(self) -> None:
        self._either("clear")
