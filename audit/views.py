"""The audit page (leads: their teams; admins: all) and its CSV export."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from audit.query import csv_response, filtered_events
from base.errors import FieldErrors


@login_required
def audit_list(request: HttpRequest) -> HttpResponse:
    try:
        events = filtered_events(request.user, request.GET)
        error = ""
    except FieldErrors as exc:
        events, error = filtered_events(request.user, {}), str(exc)
    page = Paginator(events, 100).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "audit/list.html",
        {"page": page, "error": error, "query": query.urlencode(), "filters": request.GET},
    )


@login_required
def audit_export(request: HttpRequest) -> StreamingHttpResponse:
    return csv_response(request, filtered_events(request.user, request.GET))
