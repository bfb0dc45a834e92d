"""What admins do to alerts, rules and silences: each validated, written and audited together."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.record import record
from base.errors import FieldErrors
from monitoring.models import Alert, AlertRule, AlertState, Scope, Silence

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_SECONDS = 7 * 86400
MAX_REASON = 255
RULE_FIELDS: tuple[str, ...] = (
    "name",
    "metric",
    "scope",
    "scope_value",
    "below",
    "warning",
    "critical",
)
RULE_FIELDS += ("duration_s", "repeat_s", "enabled", "description")


def _rule_view(rule: AlertRule) -> dict[str, Any]:
    return {name: getattr(rule, name) for name in RULE_FIELDS}


def _number(data: dict[str, Any], name: str) -> float | None:
    raw = str(data.get(name) or "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise FieldErrors(
            {name: _("must be a number, got %(value)r") % {"value": raw[:20]}}
        ) from None


def _seconds(data: dict[str, Any], name: str, default: int) -> int:
    raw = str(data.get(name) if data.get(name) is not None else default).strip()
    if not raw.isdigit() or int(raw) > MAX_SECONDS:
        message = _("must be a whole number of seconds from 0 to %(most)d, got %(value)r")
        raise FieldErrors({name: message % {"most": MAX_SECONDS, "value": raw[:20]}})
    return int(raw)


def _text(data: dict[str, Any], name: str, most: int, *, required: bool = False) -> str:
    value = str(data.get(name) or "").strip()
    if required and not value:
        raise FieldErrors({name: _("is required")})
    if len(value) > most:
        raise FieldErrors({name: _("must be at most %(most)d characters") % {"most": most}})
    return value


def clean_rule(data: dict[str, Any]) -> dict[str, Any]:
    """A rule's fields from a form or a JSON body, or FieldErrors naming the field and limit."""
    scope = str(data.get("scope") or Scope.CLUSTER)
    if scope not in Scope.values:
        choices = ", ".join(Scope.values)
        raise FieldErrors({"scope": _("must be one of %(choices)s") % {"choices": choices}})
    fields = {
        "name": _text(data, "name", 100, required=True),
        "metric": _text(data, "metric", 100, required=True),
        "scope": scope,
        "scope_value": _text(data, "scope_value", 100, required=scope != Scope.CLUSTER),
        "below": str(data.get("below", "")).lower() in ("1", "true", "on", "yes"),
        "warning": _number(data, "warning"),
        "critical": _number(data, "critical"),
        "duration_s": _seconds(data, "duration_s", 0),
        "repeat_s": _seconds(data, "repeat_s", 3600),
        "enabled": str(data.get("enabled", "true")).lower() in ("1", "true", "on", "yes"),
        "description": _text(data, "description", 255),
    }
    if fields["warning"] is None and fields["critical"] is None:
        raise FieldErrors({"warning": _("a warning or a critical threshold is required")})
    return fields


def save_rule(rule: AlertRule | None, data: dict[str, Any], *, acting_user: User) -> AlertRule:
    """Create a rule (`rule` None) or change one."""
    fields = clean_rule(data)
    taken = AlertRule.objects.filter(name=fields["name"])
    if rule is not None:
        taken = taken.exclude(pk=rule.pk)
    if taken.exists():
        raise FieldErrors({"name": _("a rule named %(name)r exists") % {"name": fields["name"]}})
    with transaction.atomic():
        before = _rule_view(rule) if rule else None
        rule = rule or AlertRule()
        for name, value in fields.items():
            setattr(rule, name, value)
        rule.save()
        action = "alert_rule.update" if before else "alert_rule.create"
        record(
            action, actor=acting_user, team=None, target=rule, before=before, after=_rule_view(rule)
        )
    return rule


def delete_rule(rule: AlertRule, *, acting_user: User) -> None:
    with transaction.atomic():
        record(
            "alert_rule.delete", actor=acting_user, team=None, target=rule, before=_rule_view(rule)
        )
        rule.delete()


def acknowledge(alert: Alert, *, acting_user: User) -> Alert:
    """Someone is on it: no more repeats; it fires again only if it gets worse."""
    if alert.state != AlertState.FIRING:
        message = _("only a firing alert can be acknowledged; this one is %(state)s")
        raise FieldErrors({"state": message % {"state": alert.state}})
    with transaction.atomic():
        alert.state, alert.acknowledged_at = AlertState.ACKNOWLEDGED, timezone.now()
        alert.acknowledged_by = acting_user
        alert.save(update_fields=["state", "acknowledged_at", "acknowledged_by"])
        after = {"rule": alert.rule.name, "subject": alert.subject}
        record("alert.acknowledged", actor=acting_user, team=alert.team, target=alert, after=after)
    return alert


def add_silence(data: dict[str, Any], *, acting_user: User, now: datetime | None = None) -> Silence:
    """Silence a rule's alerts (or all rules') on subjects starting with `subject`."""
    now = now or timezone.now()
    reason = _text(data, "reason", MAX_REASON, required=True)
    subject = _text(data, "subject", 200)
    ends_at = _ends_at(data, now)
    rule_id = str(data.get("rule") or "").strip()
    rule = None
    if rule_id:
        rule = AlertRule.objects.filter(pk=int(rule_id) if rule_id.isdigit() else 0).first()
        if rule is None:
            raise FieldErrors({"rule": _("no rule with id %(id)r") % {"id": rule_id[:20]}})
    with transaction.atomic():
        silence = Silence.objects.create(
            rule=rule, subject=subject, reason=reason, ends_at=ends_at, created_by=acting_user
        )
        after = {"rule": rule.name if rule else "", "subject": subject, "reason": reason}
        after["ends_at"] = ends_at.isoformat()
        record("silence.create", actor=acting_user, team=None, target=silence, after=after)
    return silence


def _ends_at(data: dict[str, Any], now: datetime) -> datetime:
    minutes = str(data.get("minutes") or "").strip()
    most = MAX_SECONDS // 60
    if not minutes.isdigit() or not 1 <= int(minutes) <= most:
        message = _("must be a whole number of minutes from 1 to %(most)d, got %(value)r")
        raise FieldErrors({"minutes": message % {"most": most, "value": minutes[:20]}})
    return now + timedelta(minutes=int(minutes))


def end_silence(silence: Silence, *, acting_user: User) -> None:
    with transaction.atomic():
        before = {"ends_at": silence.ends_at.isoformat()}
        silence.ends_at = timezone.now()
        silence.save(update_fields=["ends_at"])
        after = {"ends_at": silence.ends_at.isoformat()}
        record(
            "silence.end", actor=acting_user, team=None, target=silence, before=before, after=after
        )
