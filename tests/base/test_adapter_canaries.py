"""Canaries: base.redis_clients and base.channel_layer rely on Django's and channels_redis's
internals; these fail loudly when an upgrade changes what they rely on."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

import pytest
from channels_redis.core import RedisChannelLayer as LibraryLayer
from django.conf import settings
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient

from base.cache import RedisCache
from base.channel_layer import RedisChannelLayer
from base.redis_clients import ReusingClient

needs_redis = pytest.mark.skipif(not settings.REDIS_URL, reason="a Redis matter")


def test_pinned_channels_redis_is_the_one_the_layer_was_written_for() -> None:
    assert version("channels_redis") == "4.3.0", "re-check base/channel_layer.py's Lua scripts"


def test_django_still_builds_a_redis_client_per_call_through_the_private_names() -> None:
    internals: Any = DjangoRedisCache("redis://127.0.0.1:1/0", {})
    assert internals._class is RedisCacheClient
    assert "self._class(" in inspect.getsource(vars(DjangoRedisCache)["_cache"].func)
    assert "self._client(connection_pool=pool)" in inspect.getsource(RedisCacheClient.get_client)


def test_the_cache_builds_one_client_per_pool() -> None:
    cache: Any = RedisCache("redis://127.0.0.1:1/0", {})
    client = cache._cache
    assert isinstance(client, ReusingClient)
    assert client.get_client() is client.get_client(write=True)  # one server: one pool


def test_channels_redis_keys_are_where_the_scripts_look() -> None:
    layer = LibraryLayer(prefix="canary")
    assert layer._group_key("team.1.jobs") == b"canary:group:team.1.jobs"
    assert layer._backup_channel_name("canary.x!") == "canary.x!$inflight"
    by_connection, serialized, capacity = layer._map_channel_keys_to_connection(
        ["specific.a!b"], {"type": "job.status"}
    )
    assert list(serialized) == ["canaryspecific.a!"] and capacity["canaryspecific.a!"] == 100
    assert "canaryspecific.a!" in next(iter(by_connection.values()))


@pytest.fixture
async def layers() -> AsyncIterator[tuple[RedisChannelLayer, LibraryLayer]]:
    config: dict[str, Any] = dict(settings.CHANNEL_LAYERS["default"]["CONFIG"])  # type: ignore[arg-type]
    config["prefix"] = f"canary{uuid.uuid4().hex[:8]}"
    ours, library = RedisChannelLayer(**config), LibraryLayer(**config)
    yield ours, library
    await ours.flush()


@needs_redis
async def test_what_the_library_sends_our_layer_receives_and_back(
    layers: tuple[RedisChannelLayer, LibraryLayer],
) -> None:
    ours, library = layers
    ours_channel, library_channel = await ours.new_channel(), await library.new_channel()
    await library.group_add("team.1.jobs", ours_channel)
    await ours.group_add("team.1.jobs", library_channel)
    await library.group_send("team.1.jobs", {"type": "job.status", "n": 1})
    await ours.group_send_many([("team.1.jobs", {"type": "job.status", "n": 2})])
    assert [(await ours.receive(ours_channel))["n"] for _ in range(2)] == [1, 2]
    assert [(await library.receive(library_channel))["n"] for _ in range(2)] == [1, 2]
