"""The Redis channel layer's `group_send_many` and batched receive."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.conf import settings

from base.channel_layer import RedisChannelLayer

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="a Redis matter")


@pytest.fixture
async def layer() -> AsyncIterator[RedisChannelLayer]:
    config: Any = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    redis_layer = RedisChannelLayer(**{**config, "prefix": f"test{uuid.uuid4().hex[:8]}"})
    yield redis_layer
    await redis_layer.flush()


async def test_group_send_many_reaches_every_member_in_order(layer: RedisChannelLayer) -> None:
    first, second, other = [await layer.new_channel() for _ in range(3)]
    for channel in (first, second):
        await layer.group_add("team.1.job.1", channel)
    await layer.group_add("team.2.job.2", other)
    await layer.group_send_many(
        [
            ("team.1.job.1", {"type": "job.log", "seq": 1}),
            ("team.2.job.2", {"type": "job.log", "seq": 7}),
            ("team.1.job.1", {"type": "job.log", "seq": 2}),
            ("team.3.job.3", {"type": "job.log", "seq": 9}),  # nobody listens
        ]
    )
    for channel in (first, second):
        assert [(await layer.receive(channel))["seq"] for _ in range(2)] == [1, 2]
    assert (await layer.receive(other))["seq"] == 7


async def test_a_channel_that_left_its_group_gets_nothing(layer: RedisChannelLayer) -> None:
    stays, leaves = await layer.new_channel(), await layer.new_channel()
    for channel in (stays, leaves):
        await layer.group_add("team.1.jobs", channel)
    await layer.group_discard("team.1.jobs", leaves)
    await layer.group_send_many([("team.1.jobs", {"type": "job.status", "n": 1})])
    assert (await layer.receive(stays))["n"] == 1
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive(leaves), 0.5)


async def test_a_process_receives_a_long_backlog_whole_and_in_order(
    layer: RedisChannelLayer,
) -> None:
    channels = [await layer.new_channel() for _ in range(3)]
    for channel in channels:
        await layer.group_add("team.1.job.1", channel)
    count = 1200  # more than one fetch takes
    await layer.group_send_many(
        [("team.1.job.1", {"type": "job.log", "seq": n}) for n in range(count)]
    )

    async def read(channel: str) -> list[int]:
        return [(await layer.receive(channel))["seq"] for _ in range(count)]

    assert await asyncio.gather(*map(read, channels)) == [list(range(count))] * 3
