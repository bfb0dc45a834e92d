"""The Redis channel layer, with a group send for many messages at once and a receive that
takes many at once.

channels_redis spends four round trips on every `group_send` (expire members, read them, expire
old messages, push). A batch of GPU samples fans out to a group per job; `group_send_many`
sends all of them in two round trips per Redis host: one script reads every group's members,
one pushes every message, in order.

All websockets of a process receive through one Redis key, which channels_redis reads one
message at a time, four round trips each, one after the other: a few hundred messages a second
at most on a busy event loop, whatever the CPU. Here one reader task per process takes up to
FETCH_MAX messages per round trip, keeping them in a backup key until they have arrived, so a
cancelled read loses nothing (as channels_redis's backup does), and fills the channels'
buffers; each consumer just waits on its own.

Both paths write and read channels_redis's own keys (`<prefix>:group:<group>` sorted sets of
channels, `<prefix><channel>` sorted sets of messages, `<channel>$inflight` backups) in Lua, so
they interoperate with its `group_send` and `receive`; tests/base/test_adapter_canaries.py
fails if channels_redis changes that layout. Why not its public calls alone: on
`bench/live_fanout.py --seconds 15` (100 nodes, 1,000 browsers, two runs each, alternating),
channels_redis alone took the web process to 89-90 % of a core with metrics p99 1.0-5.3 s
(2.5 % dropped in one run); this layer 54-64 % with p99 0.34-0.44 s and nothing dropped.

With Redis away (base.outage), sends are dropped with a warning (what they carry is in the
database: consumers fill gaps from it, pages reload it), joining a group raises the builtin
`ConnectionError`, which a consumer turns into "try again later" without knowing the layer, and
the reader waits for Redis to come back.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from channels_redis.core import RedisChannelLayer as BaseRedisChannelLayer

from base.outage import RETRY_S, UNREACHABLE, Outage

logger = logging.getLogger(__name__)

# KEYS: group keys. ARGV: the score (join time) before which members have expired.
MEMBERS_SCRIPT = """
local members = {}
for i = 1, #KEYS do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, ARGV[1])
    members[i] = redis.call('ZRANGE', KEYS[i], 0, -1)
end
return members
"""

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

# KEYS: a channel key, its backup. ARGV: how many to take; "1" if the last batch arrived (its
# backup can go), "0" if not (a cancelled read: its messages go back, first in line).
FETCH_SCRIPT = """
if ARGV[2] == '0' then
    local lost = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
    for i = 1, #lost, 2 do
        redis.call('ZADD', KEYS[1], lost[i + 1], lost[i])
    end
end
redis.call('DEL', KEYS[2])
local taken = redis.call('ZPOPMIN', KEYS[1], ARGV[1])
for i = 1, #taken, 2 do
    redis.call('ZADD', KEYS[2], taken[i + 1], taken[i])
end
return taken
"""
FETCH_MAX = 500

Push = tuple[str, bytes, int]  # channel key, serialized message, capacity
T = TypeVar("T")


class RedisChannelLayer(BaseRedisChannelLayer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fetched: dict[str, deque[bytes]] = collections.defaultdict(deque)
        self._arrived: dict[str, bool] = collections.defaultdict(lambda: True)
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._receivers = 0
        self.outage = Outage(
            "Redis channel layer", "live messages are dropped and websockets refused"
        )

    async def _reached(self, call: Callable[..., Awaitable[T]], *args: Any) -> T:
        """`call(*args)` on Redis; the builtin ConnectionError while Redis is away."""
        if not self.outage.should_try():
            raise ConnectionError(f"{self.outage.what} is away")
        try:
            result = await call(*args)
        except UNREACHABLE as exc:
            self.outage.failed(exc)
            raise ConnectionError(f"{self.outage.what} is away: {exc}") from exc
        self.outage.reached()
        return result

    async def _sent(self, call: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """A send, dropped while Redis is away (the outage's warning says so)."""
        with contextlib.suppress(ConnectionError):
            await self._reached(call, *args)

    async def group_add(self, group: str, channel: str) -> None:
        """Join a group; ConnectionError while Redis is away, so the socket is refused."""
        await self._reached(super().group_add, group, channel)

    async def group_discard(self, group: str, channel: str) -> None:
        # Missed while Redis is away: the membership expires with the group expiry anyway.
        await self._sent(super().group_discard, group, channel)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await self._sent(super().send, channel, message)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await self._sent(super().group_send, group, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        """The next message of a channel. A process-local channel ("...!...") waits on its
        buffer, which one reader task per process fills (channels_redis has every waiting
        consumer race for a lock instead: a task and a wait per consumer and message)."""
        if "!" not in channel:
            return await super().receive(channel)
        assert self.require_valid_channel_name(channel), "Channel name not valid"
        self._receivers += 1
        try:
            self._keep_reading(self.non_local_name(channel))
            buffer = self.receive_buffer[channel]
            message: dict[str, Any] = await buffer.get()
        finally:
            self._receivers -= 1
        if buffer.empty() and self.receive_buffer.get(channel) is buffer:
            del self.receive_buffer[channel]  # as channels_redis: no buffers left behind
        return message

    def _keep_reading(self, real_channel: str) -> None:
        loop = asyncio.get_running_loop()
        reader = self._readers.get(real_channel)
        if reader is None or reader.done() or reader.get_loop() is not loop:
            self._readers[real_channel] = loop.create_task(self._read(real_channel))

    async def _read(self, real_channel: str) -> None:
        """Move the process's messages into its channels' buffers while anything receives."""
        while self._receivers:
            try:
                channels, message = await self._reached(self.receive_single, real_channel)
            except ConnectionError:  # Redis away: the sockets stay, the reader tries again
                await asyncio.sleep(RETRY_S)
                continue
            except Exception:  # whatever else: logged, and the reader goes on
                logger.exception("reading %s from Redis failed", real_channel)
                await asyncio.sleep(1)
                continue
            for channel in channels if isinstance(channels, list) else [channels]:
                self.receive_buffer[channel].put_nowait(message)  # full: the oldest goes

    async def receive_single(self, channel: str) -> tuple[Any, dict[str, Any]]:
        """One message of a process-local channel ("...!"), from a batch taken at once."""
        if not channel.endswith("!"):
            return await super().receive_single(channel)
        key = self.prefix + channel
        index = self.consistent_hash(channel)
        if self._fetched[key]:
            # Let the consumers empty their buffers (each holds `capacity` at most, and drops
            # the oldest past that) before the next message goes in.
            await asyncio.sleep(0)
        while not self._fetched[key]:
            await self._fetch(index, key)
        message = self.deserialize(self._fetched[key].popleft())
        return message.pop("__asgi_channel__", channel), message

    async def _fetch(self, index: int, key: str) -> None:
        connection = self.connection(index)
        arrived, self._arrived[key] = self._arrived[key], False
        backup = self._backup_channel_name(key)
        taken = await connection.eval(FETCH_SCRIPT, 2, key, backup, FETCH_MAX, int(arrived))
        self._fetched[key].extend(taken[0::2])
        self._arrived[key] = True  # no await since the reply: it is in memory now
        if not taken:  # nothing waiting: block until something comes
            popped = await connection.bzpopmin(key, timeout=self.brpop_timeout)
            if popped is not None:
                self._fetched[key].append(popped[1])

    async def group_send_many(self, messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Send each (group, message) to its group's members; a full channel drops the message
        as `group_send` does (the consumers' delivery fills log gaps from storage); all are
        dropped while Redis is away."""
        await self._sent(self._group_send_many, messages)

    async def _group_send_many(self, messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
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
        """Each group's channels, dropping those past the group expiry: one script per host,
        each group read once however often it occurs."""
        stale = int(time.time()) - self.group_expiry
        by_connection: dict[int, list[str]] = collections.defaultdict(list)
        for group in dict.fromkeys(groups):
            assert self.require_valid_group_name(group), "Group name not valid"
            by_connection[self.consistent_hash(group)].append(group)
        members: dict[str, list[str]] = {}
        for index, distinct in by_connection.items():
            keys = [self._group_key(group) for group in distinct]
            replies = await self.connection(index).eval(MEMBERS_SCRIPT, len(keys), *keys, stale)
            for group, names in zip(distinct, replies, strict=True):
                members[group] = [name.decode() for name in names]
        return [members[group] for group in groups]

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
