"""Websocket consumers for a job and a team's job list; both refuse outsiders at connect."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.core.exceptions import PermissionDenied
from django.http import Http404

from jobs.access import access_job
from jobs.streams import job_group, team_group
from tenants.access import access_team


class TenantConsumer(AsyncJsonWebsocketConsumer):
    """Resolves the group at connect through an access helper; no access, no connection."""

    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        try:
            self.group = await database_sync_to_async(self.authorised_group)(user)
        except (Http404, PermissionDenied):
            await self.close(code=4404)
            return
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    def authorised_group(self, user: Any) -> str:
        raise NotImplementedError

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def job_status(self, message: dict[str, Any]) -> None:
        await self.send_json(message)


class JobConsumer(TenantConsumer):
    """`/ws/jobs/<id>/`: the job's status changes."""

    def authorised_group(self, user: Any) -> str:
        job = access_job(user, self.scope["url_route"]["kwargs"]["job_id"])
        return job_group(job.team_id, job.pk)


class TeamJobsConsumer(TenantConsumer):
    """`/ws/teams/<slug>/`: status changes of every job of the team."""

    def authorised_group(self, user: Any) -> str:
        team = access_team(user, self.scope["url_route"]["kwargs"]["team_slug"])
        return team_group(team.pk)
