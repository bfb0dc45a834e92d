"""`evaluate_alerts`: one round of the controller's alert duty, on its clock's `now`.

A breach opens a pending alert; one that holds for its rule's duration fires (audited, notified);
a firing alert is notified again every repeat interval until acknowledged; a worse level
escalates it (firing again, notified at once); a cleared condition resolves it (a pending one is
dropped). One live alert per rule and subject. Silenced alerts change state as usual but tell
nobody; once the silence ends, a firing one is notified at its next round.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.models import AuditEvent
from audit.record import append, audit_event
from base.roles import Role
from jobs.models import Job
from monitoring.alerts.evaluate import Breach, RuleView, breaches
from monitoring.alerts.figures import Figures, Reading, read
from monitoring.models import (
    LIVE_ALERT_STATES,
    Alert,
    AlertRule,
    AlertState,
    Silence,
)
from notifications.send import notify, notify_admins
from tenants.models import Membership

if TYPE_CHECKING:
    from django.contrib.auth.models import User

ALERTS_PATH = "/alerts/"
Whose = tuple[str, int | None]
"""("team", team id) or ("job", job id)."""
LEVEL_RANK = {"warning": 1, "critical": 2}
FIELDS = ["level", "state", "value", "fired_at", "notified_at", "resolved_at"]
WRITE_BATCH = 1000


@dataclass
class Round:
    """What one round changed, by what happened to the alerts."""

    fired: list[Alert] = field(default_factory=list)
    escalated: list[Alert] = field(default_factory=list)
    repeated: list[Alert] = field(default_factory=list)
    resolved: list[Alert] = field(default_factory=list)
    pending: int = 0


def evaluate_alerts(now: datetime | None = None, figures: Figures | None = None) -> Round:
    """Evaluate every enabled rule once (figures: what `figures.gather` would read)."""
    now = now or timezone.now()
    rules = {rule.pk: rule for rule in AlertRule.objects.filter(enabled=True)}
    views = [
        RuleView(r.pk, r.metric, r.scope, r.scope_value, r.below, r.warning, r.critical)
        for r in rules.values()
    ]
    metrics = {view.metric for view in views}  # the fields the rules name, no other
    found = breaches(views, read(now, metrics) if figures is None else Reading(figures))
    with transaction.atomic():
        live = {
            (a.rule_id, a.subject): a
            for a in Alert.objects.select_for_update(of=("self",))
            .select_related("rule", "team")
            .filter(state__in=LIVE_ALERT_STATES)
        }
        before = {alert.pk: _fields(alert) for alert in live.values()}
        done = Round()
        changed, created = _step(rules, found, live, now, done)
        gone = [a.pk for key, a in live.items() if key not in found and a.state == "pending"]
        Alert.objects.filter(pk__in=gone).delete()
        Alert.objects.bulk_create(created)
        before |= {alert.pk: _fields(alert) for alert in created}
        _tell(done, now)
        _write([*changed.values(), *created], before)
        append(_audit(done))
    return done


def _fields(alert: Alert) -> tuple[Any, ...]:
    return tuple(getattr(alert, name) for name in FIELDS)


def _write(alerts: list[Alert], before: dict[int, tuple[Any, ...]]) -> None:
    """Write the fields that changed since `before`, one UPDATE per set of changes alike: a
    round fires, notifies and resolves its alerts at one `now`, so its dozens of alerts fired
    take one statement (bulk_update would build a CASE for every alert and field)."""
    alike: dict[tuple[tuple[str, Any], ...], list[int]] = defaultdict(list)
    for alert in alerts:
        after = zip(FIELDS, _fields(alert), before[alert.pk], strict=True)
        if changes := tuple((name, value) for name, value, old in after if value != old):
            alike[changes].append(alert.pk)
    for changes, pks in alike.items():
        for start in range(0, len(pks), WRITE_BATCH):  # within the databases' parameter limits
            Alert.objects.filter(pk__in=pks[start : start + WRITE_BATCH]).update(**dict(changes))


def _step(
    rules: dict[int, AlertRule],
    found: dict[tuple[int, str], Breach],
    live: dict[tuple[int, str], Alert],
    now: datetime,
    done: Round,
) -> tuple[dict[int, Alert], list[Alert]]:
    """Move the alerts on; returns the live ones changed (by id) and the new ones."""
    changed: dict[int, Alert] = {}
    created: list[Alert] = []
    for key, breach in found.items():
        rule, alert = rules[key[0]], live.get(key)
        if alert is None:
            alert = _open(rule, key[1], breach, now)
            created.append(alert)
        elif _update(alert, rule, breach, now, done):
            changed[alert.pk] = alert
        if alert.state == AlertState.PENDING:
            if (now - alert.started_at).total_seconds() >= rule.duration_s:
                alert.state, alert.fired_at = AlertState.FIRING, now
                done.fired.append(alert)
                if alert.pk is not None:
                    changed[alert.pk] = alert
            else:
                done.pending += 1
    for key, alert in live.items():
        if key not in found and alert.state != AlertState.PENDING:
            alert.state, alert.resolved_at = AlertState.RESOLVED, now
            done.resolved.append(alert)
            changed[alert.pk] = alert
    return changed, created


def _open(rule: AlertRule, subject: str, breach: Breach, now: datetime) -> Alert:
    where = breach.where
    return Alert(
        rule=rule,
        subject=subject,
        level=breach.level,
        state=AlertState.PENDING,
        value=breach.value,
        team_id=where.team_id,
        job_id=where.job_id,
        node_id=where.node_id,
        started_at=now,
    )


def _update(alert: Alert, rule: AlertRule, breach: Breach, now: datetime, done: Round) -> bool:
    """Escalate, lower or repeat a live alert; whether it changed."""
    worse = LEVEL_RANK[breach.level] > LEVEL_RANK[alert.level]
    if breach.level == alert.level and not _repeat_due(alert, rule, now):
        return False
    alert.level, alert.value = breach.level, breach.value
    if worse and alert.state != AlertState.PENDING:
        alert.state = AlertState.FIRING  # an acknowledged alert that got worse fires again
        done.escalated.append(alert)
    elif _repeat_due(alert, rule, now):
        done.repeated.append(alert)
    return True


def _repeat_due(alert: Alert, rule: AlertRule, now: datetime) -> bool:
    if alert.state != AlertState.FIRING:
        return False
    return alert.notified_at is None or (now - alert.notified_at).total_seconds() >= rule.repeat_s


def _tell(done: Round, now: datetime) -> None:
    """Tell each alert's people (admins, its team's leads, its job's owner), unless silenced."""
    told = [
        *((a, _("firing")) for a in done.fired),
        *((a, _("escalated")) for a in done.escalated),
        *((a, _("still firing")) for a in done.repeated),
        *((a, _("resolved")) for a in done.resolved),
    ]
    if not told:
        return
    silences = list(Silence.objects.filter(ends_at__gt=now))
    people = _people({a.team_id for a, _ in told}, {a.job_id for a, _ in told})
    for alert, what in told:
        if any(_silences(s, alert) for s in silences):
            continue
        resolved = alert.state == AlertState.RESOLVED
        level = "info" if resolved else alert.level
        title = _("%(rule)s on %(subject)s: %(what)s") % {
            "rule": alert.rule.name,
            "subject": alert.subject,
            "what": what,
        }
        body = _("value %(value)g, level %(level)s") % {"value": alert.value, "level": alert.level}
        key = f"alert:{alert.pk}:{alert.state}:{alert.level}" if alert in done.fired else ""
        notify_admins(level=level, title=title, body=body, link=ALERTS_PATH, dedupe_key=key)
        users = people["team", alert.team_id] + people["job", alert.job_id]
        if alert.team_id is not None:
            notify(users, level=level, title=title, body=body, link=ALERTS_PATH, team=alert.team)
        if not resolved:
            alert.notified_at = now


def _silences(silence: Silence, alert: Alert) -> bool:
    return (silence.rule_id in (None, alert.rule_id)) and alert.subject.startswith(silence.subject)


def _people(team_ids: set[int | None], job_ids: set[int | None]) -> dict[Whose, list[User]]:
    """The users to tell: a team's leads, a job's owner (admins are told anyway)."""
    found: dict[Whose, list[User]] = defaultdict(list)
    teams = [team_id for team_id in team_ids if team_id is not None]
    leads = Membership.unscoped.filter(team_id__in=teams, role=Role.LEAD).select_related("user")
    for membership in leads:
        if not membership.user.is_staff:
            found["team", membership.team_id].append(membership.user)
    jobs = [job_id for job_id in job_ids if job_id is not None]
    for job in Job.unscoped.filter(pk__in=jobs).select_related("owner").only("id", "owner"):
        if not job.owner.is_staff:
            found["job", job.pk].append(job.owner)
    return found


def _audit(done: Round) -> list[AuditEvent]:
    events = []
    for action, alerts in (
        ("alert.firing", done.fired),
        ("alert.escalated", done.escalated),
        ("alert.resolved", done.resolved),
    ):
        for alert in alerts:
            after = {"rule": alert.rule.name, "subject": alert.subject, "level": alert.level}
            events.append(
                audit_event(
                    action,
                    actor=None,
                    team=alert.team,
                    target=alert,
                    after=after | {"value": alert.value},
                )
            )
    return events
