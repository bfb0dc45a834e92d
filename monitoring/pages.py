"""`/cluster/`: every node and GPU at a glance, for platform admins."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from base.auth import admin_required
from cluster.models import Node
from monitoring import hot


@admin_required
def cluster(request: HttpRequest) -> HttpResponse:
    nodes = list(Node.objects.select_related("gpu_type").prefetch_related("gpus"))
    latest = hot.latest((gpu.node_id, gpu.index) for node in nodes for gpu in node.gpus.all())
    rows = [
        (node, [(gpu, latest.get((node.pk, gpu.index))) for gpu in node.gpus.all()])
        for node in nodes
    ]
    return render(request, "cluster/cluster.html", {"rows": rows})
