"""`/ws/teams/<slug>/`: a team's jobs; the consumer base is base/consumers.py."""

from __future__ import annotations

from typing import Any

from base.consumers import TenantConsumer
from base.streams import team_group
from tenants.access import access_team


class TeamJobsConsumer(TenantConsumer):
    """State changes of every job of the team, and its GPUs against quota."""

    def authorised_groups(self, user: Any) -> list[str]:
        team = access_team(user, self.scope["url_route"]["kwargs"]["team_slug"])
        return [team_group(team.pk)]
