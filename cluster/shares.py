"""Fair-share standings of the teams as the controller sees them now, for the team page.

The snapshot is the controller's (`build_snapshot`) without its queue; past usage, which reads a
month of finished jobs, is kept in the cache for as long as the controller keeps its own
(`Timing.past_usage_every_s`): it decays over days, so a minute moves nobody.
"""

from __future__ import annotations

from datetime import datetime

from django.core.cache import cache

from cluster.policy import effective
from cluster.snapshot import QueuedRequests, build_snapshot, past_usage
from scheduler import JobRequest, PolicyConfig
from scheduler.standing import Standing, standings

PAST_USAGE_KEY = "cluster:past-usage"
PAST_USAGE_TTL_S = 60


class _NoQueue(QueuedRequests):
    """The queue of a snapshot that looks at holdings only: empty, read from nowhere."""

    def current(self) -> list[JobRequest]:
        return []


def team_standings(now: datetime, config: PolicyConfig | None = None) -> dict[str, Standing]:
    """Every team's standing by slug, under the policy configuration the controller runs."""
    config = effective(config or PolicyConfig())
    usage = cache.get(PAST_USAGE_KEY)
    if usage is None:
        usage = past_usage(config, now)
        cache.set(PAST_USAGE_KEY, usage, PAST_USAGE_TTL_S)
    snapshot = build_snapshot(now, usage, _NoQueue())
    return standings(snapshot, config)
