"""Websocket consumers: a job, a team's jobs, and (monitoring.consumers) the cluster.

Every consumer resolves its groups at connect through an access helper and refuses otherwise:
4401 for anonymous users, 4404 for what the user may not see (the same answer as a missing
object), 4403 for a role the user lacks; 1013 (try again later) while the channel layer cannot
reach its store, as the layer says with the builtin ConnectionError (portal.channel_layer).
Messages go out through a `Delivery`, so a slow browser never blocks or loses what matters
(monitoring/delivery.py).
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
from django.utils import timezone

from jobs.access import access_job
from jobs.models import Job
from jobs.streams import job_group, status_message, team_group
from monitoring.delivery import Delivery
from monitoring.replay import LogReplay
from tenants.access import access_team

# The message types of jobs/streams.py.
LAYER_MESSAGES = frozenset(
    {"job.status", "job.log", "job.metrics", "team.usage", "cluster.gpus", "cluster.xid"}
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
        """The layer's messages (every type in jobs/streams.py) go into the delivery; the
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


class JobConsumer(TenantConsumer):
    """`/ws/jobs/<id>/[?after=<chunk id>]`: the job's status, log chunks and GPU metrics.

    With `after`, every persisted chunk past it is replayed first (a reconnecting browser sends
    the last chunk id it saw); without, the last few chunks are.
    """

    replay: LogReplay

    def authorised_groups(self, user: Any) -> list[str]:
        job = access_job(user, self.scope["url_route"]["kwargs"]["job_id"])
        self.replay = LogReplay(job, self.query_param("after"))
        return [job_group(job.team_id, job.pk)]

    def make_delivery(self) -> Delivery:
        return Delivery(self.send_json, self.replay.fill_gap)

    async def write(self) -> None:
        # The page was rendered before this socket joined the group: a change in between would
        # otherwise never reach it, so the state as it is now goes first.
        self.delivery.put(await database_sync_to_async(self.current_status)())
        await self.replay.run(self.delivery)
        await self.delivery.run()

    def current_status(self) -> dict[str, Any]:
        job = Job.unscoped.select_related("team", "owner", "queue", "gpu_type").get(
            pk=self.replay.job.pk
        )
        return dict(status_message(job, timezone.now().isoformat()))


class TeamJobsConsumer(TenantConsumer):
    """`/ws/teams/<slug>/`: state changes of every job of the team, and its GPUs against quota."""

    def authorised_groups(self, user: Any) -> list[str]:
        team = access_team(user, self.scope["url_route"]["kwargs"]["team_slug"])
        return [team_group(team.pk)]
