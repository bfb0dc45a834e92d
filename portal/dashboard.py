"""The dashboard: a person's own jobs and teams' quota; for platform admins, first the cluster
at a glance (portal/glance.py), which reads the cluster and monitoring apps."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from jobs.views import my_dashboard
from portal.glance import glance


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    context = my_dashboard(request)
    if request.user.is_staff:
        context["glance"] = glance()
    return render(request, "portal/dashboard.html", context)
