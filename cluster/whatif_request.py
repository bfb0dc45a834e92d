"""Asking for a what-if: who may, what they may change, the bounds; the row, its audit event
and its task. Platform admins change any team's quota and add or take away GPUs; a
department's leads change the quotas of its sub-teams only (as `quotas.api.may_set_quota`).
Nothing but the what-if's own row is written."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from audit.record import record
from base.errors import FieldErrors
from cluster.dry_run import policy_config
from cluster.models import WhatIf
from cluster.snapshot import PolicyTables
from cluster.whatif_run import read_nodes, submitted_in, too_many
from cluster.whatif_tasks import run_whatif
from quotas.models import GpuType
from scheduler import QuotaInfo, TeamInfo
from tenants.models import Role, Team

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tenants.scoping import AnyUser

MAX_WINDOW_DAYS = 31
MAX_GPUS = 100_000


@dataclass(frozen=True, slots=True)
class Ask:
    """A what-if as asked: the window, quotas as they would be, GPUs added (or taken away)."""

    window_start: datetime
    window_end: datetime
    quotas: tuple[QuotaInfo, ...] = ()
    gpus: Mapping[str, int] | None = None


def changeable_teams(user: AnyUser) -> QuerySet[Team]:
    """Teams whose quotas `user` may change in a what-if: every team for platform admins, the
    sub-teams of the departments they lead for others."""
    if not user.is_authenticated:
        return Team.objects.none()
    if user.is_staff:
        return Team.objects.all()
    return Team.objects.filter(
        parent__memberships__user=user, parent__memberships__role=Role.LEAD
    ).distinct()


def may_ask(user: AnyUser) -> bool:
    return bool(user.is_authenticated and (user.is_staff or changeable_teams(user).exists()))


def _check_window(ask: Ask) -> None:
    if ask.window_end <= ask.window_start:
        raise FieldErrors({"window_end": _("must be after window_start")})
    span = ask.window_end - ask.window_start
    if span > timedelta(days=MAX_WINDOW_DAYS):
        message = _("the window spans %(days).1f days; a what-if replays at most %(most)d")
        days = span.total_seconds() / 86400
        raise FieldErrors({"window_end": message % {"days": days, "most": MAX_WINDOW_DAYS}})
    count = submitted_in(ask.window_start, ask.window_end).count()
    if count > settings.WHATIF_MAX_JOBS:
        raise too_many(count)


def _check_gpus(gpus: Mapping[str, int]) -> None:
    sizes = dict(GpuType.objects.values_list("name", "gpus_per_node"))
    installed: dict[str, int] = {}
    for node in read_nodes():
        installed[node.gpu_type] = installed.get(node.gpu_type, 0) + node.size
    for gpu_type, delta in gpus.items():
        field = f"gpus:{gpu_type}"
        if gpu_type not in sizes:
            raise FieldErrors({field: _("unknown GPU type")})
        if delta % sizes[gpu_type]:
            message = _("%(delta)d is not whole nodes: a %(gpu_type)s node holds %(size)d GPUs")
            figures = {"delta": delta, "gpu_type": gpu_type, "size": sizes[gpu_type]}
            raise FieldErrors({field: message % figures})
        if -delta > installed.get(gpu_type, 0):
            message = _("cannot take away %(gone)d GPUs: the cluster has %(has)d %(gpu_type)s")
            figures = {"gone": -delta, "has": installed.get(gpu_type, 0), "gpu_type": gpu_type}
            raise FieldErrors({field: message % figures})


QuotaTable = dict[tuple[str, str], QuotaInfo]


def _split_error(
    department: str, gpu_type: str, table: QuotaTable, parents: Mapping[str, str | None]
) -> str | None:
    """What is wrong with how `department`'s quota of `gpu_type` is split among its sub-teams
    (`quotas.rules`), if anything."""
    children = [q for (t, g), q in table.items() if g == gpu_type and parents.get(t) == department]
    if not children:
        return None
    own = table.get((department, gpu_type))
    figures: dict[str, str | int] = {"department": department, "gpu_type": gpu_type}
    if own is None:
        return _("department %(department)s has no %(gpu_type)s quota to split") % figures
    widest = max(q.limit for q in children)
    if widest > own.limit:
        figures.update(widest=widest, limit=own.limit)
        message = _("a sub-team's limit of %(widest)d is above %(department)s's %(limit)d")
        return message % figures
    total = sum(q.guaranteed for q in children)
    if total > own.guaranteed:
        figures.update(total=total, guaranteed=own.guaranteed)
        message = _(
            "sub-teams of %(department)s would hold %(total)d guaranteed %(gpu_type)s, "
            "the department has %(guaranteed)d"
        )
        return message % figures
    return None


def _quota_errors(
    teams: tuple[TeamInfo, ...], table: QuotaTable, changed: Iterable[QuotaInfo]
) -> dict[str, str]:
    """The quota rules over the tables as they would be, for each changed quota: within its
    limit, and its department's split (as its sub-team, and as a department itself)."""
    parents = {t.name: t.department for t in teams}
    errors: dict[str, str] = {}
    for change in changed:
        field = f"guaranteed:{change.team}:{change.gpu_type}"
        if change.guaranteed > change.limit:
            message = _("%(guaranteed)d is above the limit of %(limit)d")
            errors[field] = message % {"guaranteed": change.guaranteed, "limit": change.limit}
            continue
        for department in (parents.get(change.team), change.team):
            error = department and _split_error(department, change.gpu_type, table, parents)
            if error:
                errors.setdefault(field, error)
    return errors


def _quota_changes(
    user: AnyUser, asked: Iterable[QuotaInfo], quotas: tuple[QuotaInfo, ...]
) -> list[dict[str, Any]]:
    """The asked quotas that differ from today's, each with what it was; PermissionDenied for a
    team the user may not change."""
    current = {(q.team, q.gpu_type): (q.guaranteed, q.limit) for q in quotas}
    allowed = set(changeable_teams(user).values_list("slug", flat=True))
    known = set(GpuType.objects.values_list("name", flat=True))
    changes = []
    for quota in asked:
        was = current.get((quota.team, quota.gpu_type), (0, 0))
        if (quota.guaranteed, quota.limit) == was:
            continue
        if quota.team not in allowed:
            raise PermissionDenied(
                _("You may change the quotas of your department's sub-teams only (%(team)s).")
                % {"team": quota.team}
            )
        if quota.gpu_type not in known:
            raise FieldErrors({f"guaranteed:{quota.team}:{quota.gpu_type}": _("unknown GPU type")})
        changes.append(
            {
                "team": quota.team,
                "gpu_type": quota.gpu_type,
                "guaranteed": quota.guaranteed,
                "limit": quota.limit,
                "before": {"guaranteed": was[0], "limit": was[1]},
            }
        )
    return changes


def request_whatif(ask: Ask, *, acting_user: User, now: datetime) -> WhatIf:
    """Check `ask`, keep it as a queued what-if, audit the request and queue its replay."""
    if not may_ask(acting_user):
        raise PermissionDenied(_("Platform admins and department leads run what-ifs."))
    gpus = {gpu_type: delta for gpu_type, delta in (ask.gpus or {}).items() if delta}
    if gpus and not acting_user.is_staff:
        raise PermissionDenied(_("Only platform admins add or take away GPUs in a what-if."))
    teams, quotas, _caps = PolicyTables().current()
    changes = _quota_changes(acting_user, ask.quotas, quotas)
    _check_window(ask)
    _check_gpus(gpus)
    changed = [QuotaInfo(c["team"], c["gpu_type"], c["guaranteed"], c["limit"]) for c in changes]
    table = {(q.team, q.gpu_type): q for q in (*quotas, *changed)}
    if errors := _quota_errors(teams, table, changed):
        raise FieldErrors(errors)
    with transaction.atomic():
        whatif = WhatIf.objects.create(
            requested_by=acting_user,
            requested_at=now,
            window_start=ask.window_start,
            window_end=ask.window_end,
            policy=policy_config().policy.value,
            changes={"quotas": changes, "gpus": gpus},
        )
        after = {
            "window": [ask.window_start.isoformat(), ask.window_end.isoformat()],
            "policy": whatif.policy,
            "changes": whatif.changes,
        }
        record("cluster.whatif", actor=acting_user, team=None, target=whatif, after=after)
        transaction.on_commit(lambda: run_whatif.delay(whatif.pk))
    return whatif
