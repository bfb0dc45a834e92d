"""GPUs a team holds now against its quota, per GPU type: one grouped query for many teams."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import F, Sum

from jobs.models import HOLDING_STATES, Job
from quotas.models import Quota
from tenants.models import Team


@dataclass(frozen=True)
class UsageRow:
    team: Team
    gpu_type: str
    used: int
    guaranteed: int
    limit: int

    @property
    def percent_of_limit(self) -> int:
        return round(100 * self.used / self.limit) if self.limit else 0


def usage_against_quota(teams: Iterable[Team]) -> list[UsageRow]:
    teams = list(teams)
    held = (
        Job.unscoped.filter(team__in=teams, state__in=HOLDING_STATES)
        .values("team_id", "gpu_type_id")
        .annotate(gpus=Sum(F("nodes") * F("gpus_per_node")))
    )
    used = {(row["team_id"], row["gpu_type_id"]): row["gpus"] for row in held}
    quotas = Quota.unscoped.filter(team__in=teams).select_related("team", "gpu_type")
    return [
        UsageRow(
            team=quota.team,
            gpu_type=quota.gpu_type.name,
            used=used.get((quota.team_id, quota.gpu_type_id), 0),
            guaranteed=quota.guaranteed,
            limit=quota.limit,
        )
        for quota in quotas
    ]
