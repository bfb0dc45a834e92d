"""Incident pages, for platform admins: the list, one incident (timeline, what it touched, the
post-mortem), and the CSV export."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _

from base.auth import admin_required, signed_in
from base.errors import FieldErrors
from base.forms import flash_errors
from base.streaming import streamed
from monitoring.incidents import csv_lines, return_gpus, write_postmortem
from monitoring.models import Incident

PAGE_SIZE = 50


@admin_required
def incident_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(Incident.objects.all(), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "monitoring/incidents.html", {"page": page, "query": ""})


@admin_required
def incident_detail(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=incident_id)
    if request.method == "POST":
        try:
            if request.POST.get("action") == "return_gpus":
                count = return_gpus(incident, acting_user=signed_in(request))
                messages.success(
                    request, _("%(count)d GPUs returned to service.") % {"count": count}
                )
            else:
                write_postmortem(incident, request.POST.dict(), acting_user=signed_in(request))
                messages.success(request, _("Incident saved."))
        except FieldErrors as exc:
            flash_errors(request, exc)
        return redirect("incident-detail", incident_id=incident.pk)
    events = incident.events.select_related("actor")
    return render(request, "monitoring/incident.html", {"incident": incident, "events": events})


@admin_required
def incident_export(request: HttpRequest) -> StreamingHttpResponse:
    response = streamed(
        request, csv_lines(Incident.objects.order_by("id").iterator()), content_type="text/csv"
    )
    response["Content-Disposition"] = 'attachment; filename="incidents.csv"'
    return response
