"""The admin's node page: inventory, GPUs in use and health, cordon and uncordon with a reason."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from base.auth import admin_required, signed_in
from base.errors import FieldErrors
from base.forms import flash_errors
from cluster import connect
from cluster.actions import set_cordon
from cluster.backend import Unavailable
from cluster.models import Gpu, Node
from cluster.occupancy import occupancy


@admin_required
def node_list(request: HttpRequest) -> HttpResponse:
    faulty = Prefetch(
        "gpus", queryset=Gpu.objects.filter(healthy=False).order_by("index"), to_attr="faulty_gpus"
    )
    nodes = (
        Node.objects.select_related("gpu_type").prefetch_related(faulty).order_by("rack", "name")
    )
    return render(request, "cluster/nodes.html", {"rows": occupancy(nodes)})


@admin_required
@require_POST
def node_cordon(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(Node, name=name)
    cordon = request.POST.get("action") != "uncordon"
    try:
        set_cordon(
            node,
            cordon,
            reason=request.POST.get("reason", ""),
            acting_user=signed_in(request),
            backend=connect.backend(),
        )
        done = _("%(node)s cordoned.") if cordon else _("%(node)s uncordoned.")
        messages.success(request, done % {"node": node.name})
    except FieldErrors as exc:
        flash_errors(request, exc)
    except Unavailable as exc:
        messages.error(request, _("cluster API unavailable: %(error)s") % {"error": exc})
    return redirect("manage-nodes")
