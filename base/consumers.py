"""The websocket consumer every tenant stream derives from.

A consumer resolves its groups at connect through an access helper and refuses otherwise:
4401 for anonymous users, 4404 for what the user may not see (the same answer as a missing
object), 4403 for a role the user lacks; 1013 (try again later) while the channel layer cannot
reach its store, as the layer says with the builtin ConnectionError (base.channel_layer).
Messages go out through a `Delivery`, so a slow browser never blocks or loses what matters
(base/delivery.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.core.exceptions import PermissionDenied
from django.http import Http404

from base.delivery import Delivery

# The message types of base/streams.py.
LAYER_MESSAGES = frozenset(
    {
        "job.status",
        "job.waiting",
        "job.log",
        "job.metrics",
        "team.usage",
        "cluster.gpus",
        "cluster.xid",
    }
)
TRY_AGAIN_LATER = 1013  # RFC 6455: the server is overloaded or a dependency is away


class TenantConsumer(AsyncJsonWebsocketConsumer):
    """Joins the groups `authorised_groups` returns; no access, no connection."""

    joined: list[str]
    delivery: Delivery
    _writer: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.joined = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        try:
            groups = await database_sync_to_async(self.authorised_groups)(user)
        except Http404:
            await self.close(code=4404)
            return
        except PermissionDenied:
            await self.close(code=4403)
            return
        try:
            for group in groups:
                await self.channel_layer.group_add(group, self.channel_name)
        except ConnectionError:  # the layer's store (Redis) is away: no live messages to give
            await self.accept()  # a close before accepting would reach the browser as a 403
            await self.close(code=TRY_AGAIN_LATER)
            return
        self.joined = groups
        await self.accept()
        self.delivery = self.make_delivery()
        self._writer = asyncio.create_task(self.write())

    def authorised_groups(self, user: Any) -> list[str]:
        raise NotImplementedError

    def make_delivery(self) -> Delivery:
        return Delivery(self.send_json)

    async def write(self) -> None:
        await self.delivery.run()

    async def disconnect(self, code: int) -> None:
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """The layer's messages (every type in base/streams.py) go into the delivery; the
        websocket's own (connect, receive, disconnect) to their handlers.

        Not through handlers: channels closes stale database connections, in a thread, before
        every handler, and at a thousand sockets that hop costs more than the rest of a
        message's way. Queueing needs no database; what reads it (connect, the log replay)
        goes through database_sync_to_async, which closes them itself."""
        if message["type"] in LAYER_MESSAGES:
            self.delivery.put(message)
        else:
            await super().dispatch(message)

    def query_param(self, name: str) -> str | None:
        values = parse_qs(self.scope.get("query_string", b"").decode()).get(name)
        return values[0] if values else None
