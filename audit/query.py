"""Filtering and CSV export of the audit trail, shared by the API and the page."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from django.http import HttpRequest, StreamingHttpResponse
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.timezone import make_aware
from django.utils.translation import gettext as _

from audit.chain import canonical_json
from audit.models import AuditEvent, AuditQuerySet
from base.errors import FieldErrors
from base.streaming import streamed

if TYPE_CHECKING:
    from rest_framework.request import Request

    from tenants.scoping import AnyUser

CSV_COLUMNS = (
    "seq",
    "at",
    "actor_name",
    "team_slug",
    "action",
    "target_type",
    "target_id",
    "before",
    "after",
    "request_id",
    "ip",
    "hash",
)


def _moment(field: str, raw: str) -> datetime:
    try:  # a well-formed but impossible date (2026-13-45) raises ValueError
        value = parse_datetime(raw)
        if value is None and (day := parse_date(raw)) is not None:
            value = datetime(day.year, day.month, day.day)
    except ValueError:
        value = None
    if value is None:
        raise FieldErrors({field: _("must be an ISO date or date-time, e.g. 2026-12-01")})
    return make_aware(value) if value.tzinfo is None else value


def filtered_events(user: AnyUser, params: Mapping[str, str]) -> AuditQuerySet:
    events = AuditEvent.objects.for_user(user)
    if team := params.get("team"):
        events = events.filter(team_slug=team)
    if action := params.get("action"):
        events = events.filter(action__startswith=action)
    if actor := params.get("actor"):
        events = events.filter(actor_name=actor)
    if since := params.get("since"):
        events = events.filter(at__gte=_moment("since", since))
    if until := params.get("until"):
        events = events.filter(at__lt=_moment("until", until))
    return events


class _Echo:
    def write(self, value: str) -> str:
        return value


def _rows(events: AuditQuerySet) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for event in events.order_by("seq").iterator(chunk_size=2000):
        values = [getattr(event, column) for column in CSV_COLUMNS]
        values[7] = canonical_json(event.before) if event.before is not None else ""
        values[8] = canonical_json(event.after) if event.after is not None else ""
        values[1] = event.at.isoformat()
        yield writer.writerow(values)


def csv_response(request: HttpRequest | Request, events: AuditQuerySet) -> StreamingHttpResponse:
    response = streamed(request, _rows(events), content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="audit.csv"'
    return response
