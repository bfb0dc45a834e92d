"""Per-connection delivery between the channel layer and a browser that may be slow.

The consumer reads the layer at once and puts each message here, so a slow browser never fills
its layer channel (where messages would be lost silently). Snapshots (status, usage, metrics)
keep only the newest per key: the older one is dropped. Log chunks queue in order; if the queue
overflows, or a chunk arrives out of turn, the gap is filled from the persisted chunks, so the
browser gets every line exactly once.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Any

MAX_QUEUED_LOG_CHUNKS = 500

Send = Callable[[dict[str, Any]], Awaitable[None]]
# (pod, after seq, before seq) -> the persisted chunks strictly between, as job.log messages
FillGap = Callable[[str, int, int | None], Awaitable[list[dict[str, Any]]]]


def snapshot_key(message: dict[str, Any]) -> tuple[Any, ...]:
    """Messages with the same key supersede each other."""
    kind = message["type"]
    if kind == "job.status":
        return (kind, message["job_id"])
    if kind == "job.metrics":
        gpus = message["gpus"]
        return (kind, message["job_id"], gpus[0]["node"] if gpus else "")
    if kind == "cluster.gpus":
        return (kind, message["node"])
    if kind == "cluster.xid":
        return (kind, message["node"], message["index"], message["at"])
    return (kind,)


class Delivery:
    """Queues a connection's messages and writes them out in one task (`run`)."""

    def __init__(self, send: Send, fill_gap: FillGap | None = None) -> None:
        self._send, self._fill_gap = send, fill_gap
        self._snapshots: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        self._logs: deque[dict[str, Any]] = deque(maxlen=MAX_QUEUED_LOG_CHUNKS)
        self._wake = asyncio.Event()
        self.positions: dict[str, int] = {}  # pod -> last seq sent
        self.superseded = 0  # snapshots dropped because a newer one came first

    def put(self, message: dict[str, Any]) -> None:
        if message["type"] == "job.log":
            self._logs.append(message)  # a full deque drops the oldest; the gap fill restores it
        else:
            key = snapshot_key(message)
            if self._snapshots.pop(key, None) is not None:
                self.superseded += 1
            self._snapshots[key] = message
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.drain()

    async def drain(self) -> None:
        while self._logs or self._snapshots:
            if self._logs:
                await self.send_log(self._logs.popleft())
            else:
                _, message = self._snapshots.popitem(last=False)
                await self._send(message)

    async def send_log(self, chunk: dict[str, Any]) -> None:
        """Send a chunk in its pod's turn: skip one already sent, fill a gap before it."""
        pod, seq = chunk["pod"], chunk["seq"]
        last = self.positions.get(pod, -1)
        if seq <= last:
            return
        if seq > last + 1 and self._fill_gap is not None:
            for missing in await self._fill_gap(pod, last, seq):
                await self._write_log(missing)
        await self._write_log(chunk)

    async def _write_log(self, chunk: dict[str, Any]) -> None:
        if chunk["seq"] > self.positions.get(chunk["pod"], -1):
            await self._send(chunk)
            self.positions[chunk["pod"]] = chunk["seq"]
