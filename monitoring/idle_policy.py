"""Each team's idle rule (its `IdlePolicy`, or the IDLE_* settings) and the action that sets it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.record import record
from base.errors import FieldErrors
from base.forms import int_field
from monitoring.models import IdleAction, IdlePolicy

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tenants.models import Team


@dataclass(frozen=True)
class IdleRule:
    """What idle means for a team's jobs and what follows (see `IdlePolicy`)."""

    util_pct: int
    minutes: int
    first_minutes: int
    action: str
    stop_grace_minutes: int
    own: bool = False
    """The team's own policy, rather than the settings' defaults."""

    @classmethod
    def default(cls) -> IdleRule:
        return cls(
            util_pct=settings.IDLE_UTIL_PCT,
            minutes=settings.IDLE_MINUTES,
            first_minutes=settings.IDLE_FIRST_MINUTES,
            action=IdleAction.NOTIFY,
            stop_grace_minutes=settings.IDLE_STOP_GRACE_MINUTES,
        )

    @classmethod
    def of(cls, policy: IdlePolicy) -> IdleRule:
        return cls(
            util_pct=policy.util_pct,
            minutes=policy.minutes,
            first_minutes=policy.first_minutes,
            action=policy.action,
            stop_grace_minutes=policy.stop_grace_minutes,
            own=True,
        )

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "own"}


MAX_MINUTES = 1440
"""The longest window, first minutes and grace a policy may set: a day."""
RULE_FIELDS = ("util_pct", "minutes", "first_minutes", "action", "stop_grace_minutes")


def idle_rules(team_ids: Collection[int]) -> dict[int, IdleRule]:
    """{team id: its rule} for these teams, in one query."""
    own = {p.team_id: IdleRule.of(p) for p in IdlePolicy.unscoped.filter(team_id__in=team_ids)}
    default = IdleRule.default()
    return {team_id: own.get(team_id, default) for team_id in team_ids}


def set_idle_policy(team: Team, rule: IdleRule, *, acting_user: User) -> IdlePolicy:
    """Make `rule` (validated by the caller) `team`'s idle policy; audited with before/after."""
    with transaction.atomic():
        policy = IdlePolicy.objects.for_team(team).select_for_update().first()
        before = IdleRule.of(policy).as_dict() if policy else None
        if policy is None:
            policy = IdlePolicy(team=team)
        for name in RULE_FIELDS:
            setattr(policy, name, getattr(rule, name))
        policy.updated_by, policy.updated_at = acting_user, timezone.now()
        policy.save()
        record(
            "team.idle_policy",
            actor=acting_user,
            team=team,
            target=policy,
            before=before,
            after=rule.as_dict(),
        )
    return policy


def parse_idle_rule(data: dict[str, str]) -> IdleRule:
    """A rule from form fields; FieldErrors naming the field and its range."""
    action = data.get("action", "")
    if action not in IdleAction.values:
        choices = ", ".join(IdleAction.values)
        raise FieldErrors({"action": _("must be one of %(choices)s") % {"choices": choices}})
    return IdleRule(
        util_pct=int_field(data, "util_pct", low=1, high=100),
        minutes=int_field(data, "minutes", low=5, high=MAX_MINUTES),
        first_minutes=int_field(data, "first_minutes", low=0, high=MAX_MINUTES),
        action=action,
        stop_grace_minutes=int_field(data, "stop_grace_minutes", low=0, high=MAX_MINUTES),
    )
