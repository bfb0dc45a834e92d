"""The audit page (admins: all; leads: their teams; members: their own jobs), its CSV export,
and the admins' check of the hash chain."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.contrib.auth.decorators import login_required
from django.core.management import CommandError, call_command
from django.core.paginator import Paginator
from django.db.models import Model
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from audit.models import AuditEvent
from audit.query import csv_response, filtered_events
from base.auth import admin_required
from base.errors import FieldErrors

FILTERS = ("team", "action", "actor", "since", "until")


@dataclass(frozen=True)
class Target:
    """What an event acted on, as a person reads it."""

    label: str
    url: str | None


@dataclass(frozen=True)
class Change:
    field: str
    before: str
    after: str
    changed: bool


def _text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def changes(event: AuditEvent) -> list[Change]:
    """The event's before and after, field by field."""
    before = event.before if isinstance(event.before, dict) else {}
    after = event.after if isinstance(event.after, dict) else {}
    keys = list(dict.fromkeys([*before, *after]))
    return [
        Change(
            key, _text(before.get(key)), _text(after.get(key)), before.get(key) != after.get(key)
        )
        for key in keys
    ]


def _link(kind: str, obj: Model, user: Any) -> str | None:
    """Where a target is shown: its page, or its team's."""
    try:
        if kind == "jobs.job":
            return reverse("job-detail", args=[obj.pk])
        if kind == "tenants.team":
            return reverse("team-detail", args=[getattr(obj, "slug", "")])
        if kind == "cluster.node":
            return reverse("manage-nodes") if user.is_staff else None
        team = getattr(obj, "team", None)
        return reverse("team-detail", args=[team.slug]) if team is not None else None
    except NoReverseMatch:
        return None


def _name(kind: str, obj: Model) -> str:
    user = getattr(obj, "user", None)
    if kind == "tenants.membership" and user is not None:
        return str(user.get_username())
    return str(getattr(obj, "slug", None) or getattr(obj, "name", None) or obj)


def targets(events: Iterable[AuditEvent], user: Any) -> dict[int, Target]:
    """Each event's target by name, with a link, from one query per kind of target. The
    events are the user's to see, so are their targets' names."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for event in events:
        if event.target_type and event.target_id:
            wanted[event.target_type].add(event.target_id)
    found: dict[tuple[str, str], Model] = {}
    for kind, ids in wanted.items():
        try:
            model = apps.get_model(kind)
        except (LookupError, ValueError):
            continue
        keys = [int(i) for i in ids if i.isdigit()]
        for obj in model._meta.base_manager.filter(pk__in=keys):
            found[kind, str(obj.pk)] = obj
    answer = {}
    for event in events:
        obj = found.get((event.target_type, event.target_id))
        if obj is not None:
            kind = event.target_type
            answer[event.seq] = Target(_name(kind, obj), _link(kind, obj, user))
        elif event.target_type:
            gone = _("%(kind)s %(id)s (deleted)") % {
                "kind": event.target_type.split(".")[-1],
                "id": event.target_id,
            }
            answer[event.seq] = Target(gone, None)
    return answer


@login_required
def audit_list(request: HttpRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    try:
        events = filtered_events(request.user, request.GET)
    except FieldErrors as exc:
        events, errors = filtered_events(request.user, {}), exc.errors
    page = Paginator(events, 100).get_page(request.GET.get("page"))
    shown = list(page.object_list)
    names = targets(shown, request.user)
    rows = [(event, names.get(event.seq), changes(event)) for event in shown]
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "rows": rows,
        "errors": errors,
        "query": query.urlencode(),
        "filters": {key: request.GET.get(key, "") for key in FILTERS},
        "verdict": None,
    }
    return render(request, "audit/list.html", context, status=400 if errors else 200)


@login_required
def audit_export(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    try:
        events = filtered_events(request.user, request.GET)
    except FieldErrors as exc:
        text = "\n".join(f"{field}: {message}" for field, message in exc.errors.items())
        return HttpResponse(text, status=400, content_type="text/plain; charset=utf-8")
    return csv_response(request, events)


def verify_chain() -> tuple[bool, str]:
    """`manage.py audit_verify`'s verdict and report, word for word."""
    output = io.StringIO()
    try:
        call_command("audit_verify", stdout=output)
    except CommandError as exc:
        return False, f"{output.getvalue()}{exc}"
    return True, output.getvalue()


@admin_required
@require_POST
def audit_verify(request: HttpRequest) -> HttpResponse:
    """Platform admins: check the whole chain against its head and the latest checkpoint."""
    intact, report = verify_chain()
    events = filtered_events(request.user, {})
    page = Paginator(events, 100).get_page(1)
    shown = list(page.object_list)
    names = targets(shown, request.user)
    context = {
        "page": page,
        "rows": [(event, names.get(event.seq), changes(event)) for event in shown],
        "errors": {},
        "query": "",
        "filters": dict.fromkeys(FILTERS, ""),
        "verdict": {"intact": intact, "report": report},
    }
    return render(request, "audit/list.html", context)
