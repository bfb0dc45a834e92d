"""One redis-py client per connection pool for Django's Redis cache: the one place that reaches
into Django's cache client.

Django builds a new `redis.Redis` for every cache call (`RedisCacheClient.get_client` calls
`self._client(connection_pool=pool)`), and redis-py 8 copies its ~170 response callbacks into
each new client. Measured on this machine (`cache.get` of a small value, 20,000 calls against a
local Redis): 210-270 µs of CPU per call through Django's client, 100-125 µs with one client
per pool. A client over a pool is thread-safe, so one per pool serves every call.

The cache chooses its client class through Django's private `_class`; this module wraps the
private `_client` constructor. tests/base/test_adapter_canaries.py fails if either changes.
"""

from __future__ import annotations

import functools
from typing import Any

from django.core.cache.backends.redis import RedisCacheClient


class ReusingClient(RedisCacheClient):
    """Django's Redis cache client, building one redis-py client per connection pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        internals: Any = self  # django-stubs leave the client's internals untyped
        internals._client = functools.cache(internals._client)


def reuse_clients(cache: Any) -> None:
    """Make a Django `RedisCache` (before its first call) build its client as `ReusingClient`."""
    cache._class = ReusingClient
