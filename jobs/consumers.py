"""`/ws/teams/<slug>/`: a team's jobs; the consumer base is base/consumers.py.

`ReadersLanguage` serves every stream of job statuses (this one and the job's own,
monitoring/consumers.py): a status message is built once for all subscribers, with codes and
figures; each consumer writes its words (state label, why the job waits) in its subscriber's
language as it sends it.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.utils import translation

from base.consumers import TenantConsumer
from base.streams import team_group
from jobs.streams import localised
from tenants.access import access_team
from tenants.ws_language import subscriber_language


class ReadersLanguage(TenantConsumer):
    """Sends job statuses with their words in the subscriber's language, chosen at connect as
    for their pages."""

    language: str = ""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:  # the base refuses anyone else
            self.language = await database_sync_to_async(subscriber_language)(self.scope)
        await super().connect()

    async def send_json(self, content: dict[str, Any], close: bool = False) -> None:
        if content.get("type") in ("job.status", "job.waiting"):
            with translation.override(self.language or None):
                content = localised(content)
        await super().send_json(content, close)


class TeamJobsConsumer(ReadersLanguage):
    """State changes of every job of the team, and its GPUs against quota."""

    def authorised_groups(self, user: Any) -> list[str]:
        team = access_team(user, self.scope["url_route"]["kwargs"]["team_slug"])
        return [team_group(team.pk)]
