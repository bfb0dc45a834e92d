"""The Redis channel layer, with a group send for many messages at once.

channels_redis spends four round trips on every `group_send` (expire members, read them, expire
old messages, push). A batch of GPU samples fans out to a group per job; `group_send_many`
sends all of them in two round trips per Redis host: one pipeline reads every group's members,
one script pushes every message, in order.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Sequence
from typing import Any

from channels_redis.core import RedisChannelLayer as BaseRedisChannelLayer

logger = logging.getLogger(__name__)

# KEYS: channel keys. ARGV: now - expiry, expiry, then (message, capacity, score) per key.
PUSH_SCRIPT = """
local stale, expiry, over = ARGV[1], ARGV[2], 0
for i = 1, #KEYS do
    local at = 3 * i
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, stale)
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[at + 1]) then
        redis.call('ZADD', KEYS[i], ARGV[at + 2], ARGV[at])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        over = over + 1
    end
end
return over
"""

Push = tuple[str, bytes, int]  # channel key, serialized message, capacity


class RedisChannelLayer(BaseRedisChannelLayer):
    async def group_send_many(self, messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Send each (group, message) to its group's members; a full channel drops the message
        as `group_send` does (the consumers' delivery fills log gaps from storage)."""
        members = await self._members([group for group, _ in messages])
        pushes: dict[int, list[Push]] = collections.defaultdict(list)
        for (_, message), channels in zip(messages, members, strict=True):
            by_connection, serialized, capacity = self._map_channel_keys_to_connection(
                channels, message
            )
            for index, keys in by_connection.items():
                pushes[index] += [(key, serialized[key], capacity[key]) for key in keys]
        for index, batch in pushes.items():
            await self._push(index, batch)

    async def _members(self, groups: list[str]) -> list[list[str]]:
        """Each group's channels, dropping those past the group expiry, one pipeline per host."""
        stale = int(time.time()) - self.group_expiry
        by_connection: dict[int, list[int]] = collections.defaultdict(list)
        for position, group in enumerate(groups):
            assert self.require_valid_group_name(group), "Group name not valid"
            by_connection[self.consistent_hash(group)].append(position)
        members: list[list[str]] = [[] for _ in groups]
        for index, positions in by_connection.items():
            pipe = self.connection(index).pipeline(transaction=False)
            for position in positions:
                key = self._group_key(groups[position])
                pipe.zremrangebyscore(key, min=0, max=stale)
                pipe.zrange(key, 0, -1)
            replies = await pipe.execute()
            for position, names in zip(positions, replies[1::2], strict=True):
                members[position] = [name.decode() for name in names]
        return members

    async def _push(self, index: int, batch: list[Push]) -> None:
        now = time.time()
        args: list[Any] = [int(now) - int(self.expiry), int(self.expiry)]
        for order, (_, message, capacity) in enumerate(batch):
            # Distinct, increasing scores keep the messages in order on a shared channel key.
            args += [message, capacity, now + order * 1e-6]
        keys = [key for key, _, _ in batch]
        over = await self.connection(index).eval(PUSH_SCRIPT, len(keys), *keys, *args)
        if over:
            logger.warning("%s of %s messages dropped: channel over capacity", over, len(keys))
