"""`/cluster/`: every node and GPU at a glance, for platform admins."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from base.auth import admin_required
from monitoring import heatmap


@admin_required
def cluster(request: HttpRequest) -> HttpResponse:
    return render(request, "cluster/cluster.html", {"heatmap": heatmap.build()})
