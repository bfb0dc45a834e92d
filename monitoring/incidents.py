"""Incidents: opened by the fault loop, one open incident per node gathering its faults; the
admins write the post-mortem, return GPUs to service and resolve it, each step audited."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.record import record
from base.errors import FieldErrors
from cluster.models import Gpu, Node
from monitoring.catalog import SEVERITY, Action
from monitoring.models import Incident, IncidentEvent, IncidentState

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_TEXT = 20_000
CSV_COLUMNS: tuple[str, ...] = (
    "id",
    "title",
    "state",
    "action",
    "opened_at",
    "resolved_at",
    "nodes",
    "gpus",
)
CSV_COLUMNS += ("jobs", "teams", "root_cause", "follow_ups")


def incident_for(node: Node, action: str, now: datetime) -> tuple[Incident, bool]:
    """The node's open incident, its action raised to `action` if worse, or a new one; and
    whether it is new."""
    open_ones = Incident.objects.filter(state=IncidentState.OPEN)  # a handful at most
    incident = next((i for i in open_ones if node.name in i.nodes), None)
    if incident is not None:
        if SEVERITY.index(Action(action)) > SEVERITY.index(Action(incident.action)):
            incident.action = action
        return incident, False
    title = _("%(action)s on %(node)s") % {"action": Action(action).label, "node": node.name}
    return Incident.objects.create(
        title=title, action=action, opened_at=now, nodes=[node.name]
    ), True


def log_event(
    incident: Incident, kind: str, text: str, *, at: datetime, actor: User | None = None
) -> None:
    IncidentEvent.objects.create(incident=incident, kind=kind, text=text[:500], at=at, actor=actor)


def _text(data: dict[str, Any], name: str) -> str:
    value = str(data.get(name) or "").strip()
    if len(value) > MAX_TEXT:
        raise FieldErrors({name: _("must be at most %(most)d characters") % {"most": MAX_TEXT}})
    return value


def write_postmortem(incident: Incident, data: dict[str, Any], *, acting_user: User) -> Incident:
    """The admins' root cause and follow-ups; with `resolve`, the incident is closed too."""
    root_cause, follow_ups = _text(data, "root_cause"), _text(data, "follow_ups")
    resolve = str(data.get("resolve", "")).lower() in ("1", "true", "on", "yes")
    with transaction.atomic():
        before = {
            "root_cause": incident.root_cause,
            "follow_ups": incident.follow_ups,
            "state": incident.state,
        }
        incident.root_cause, incident.follow_ups = root_cause, follow_ups
        now = timezone.now()
        if resolve and incident.state == IncidentState.OPEN:
            incident.state, incident.resolved_at = IncidentState.RESOLVED, now
            log_event(incident, "resolved", _("resolved"), at=now, actor=acting_user)
        else:
            log_event(incident, "postmortem", _("post-mortem updated"), at=now, actor=acting_user)
        incident.save(update_fields=["root_cause", "follow_ups", "state", "resolved_at"])
        after = {"root_cause": root_cause, "follow_ups": follow_ups, "state": incident.state}
        record(
            "incident.update",
            actor=acting_user,
            team=None,
            target=incident,
            before=before,
            after=after,
        )
    return incident


def return_gpus(incident: Incident, *, acting_user: User) -> int:
    """The incident's GPUs back in service (reset or replaced by now); their nodes stay as they
    are: a cordoned node comes back by an admin's uncordon."""
    pairs = [gpu.rsplit("/", 1) for gpu in incident.gpus]
    with transaction.atomic():
        returned = 0
        for node, index in pairs:
            returned += Gpu.objects.filter(node__name=node, index=int(index), healthy=False).update(
                healthy=True
            )
        text = _("%(count)d GPUs returned to service") % {"count": returned}
        log_event(incident, "action", text, at=timezone.now(), actor=acting_user)
        record(
            "incident.gpus_returned",
            actor=acting_user,
            team=None,
            target=incident,
            after={"gpus": incident.gpus},
        )
    return returned


def csv_rows(incidents: Iterator[Incident]) -> Iterator[list[str]]:
    yield list(CSV_COLUMNS)
    for i in incidents:
        yield [
            str(i.pk),
            i.title,
            i.state,
            i.action,
            i.opened_at.isoformat(),
            i.resolved_at.isoformat() if i.resolved_at else "",
            " ".join(i.nodes),
            " ".join(i.gpus),
            " ".join(map(str, i.jobs)),
            " ".join(i.teams),
            _cell(i.root_cause),
            _cell(i.follow_ups),
        ]


def _cell(text: str) -> str:
    """Admins' free text, kept from being read as a formula by a spreadsheet."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@") else text


class Echo:
    """A file-like object whose write returns the line, for a streamed CSV."""

    def write(self, value: str) -> str:
        return value


def csv_lines(incidents: Iterator[Incident]) -> Iterator[str]:
    writer = csv.writer(Echo())
    return (writer.writerow(row) for row in csv_rows(incidents))
