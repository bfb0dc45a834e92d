"""Health inspection pages, for platform admins: the runs with their history, one run's table of
nodes by checks (failing nodes first), and "Run inspection now"."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from base.auth import admin_required, signed_in
from monitoring.inspection_checks import CHECKS
from monitoring.models import CheckStatus, InspectionResult, InspectionRun
from monitoring.tasks import inspect_nodes

PAGE_SIZE = 50
CHECK_LABELS = {
    "heartbeat": gettext_lazy("Heartbeat"),
    "gpus": gettext_lazy("GPUs"),
    "ecc": gettext_lazy("ECC uncorrected"),
    "ecc_corrected": gettext_lazy("ECC corrected"),
    "remap": gettext_lazy("Row remap"),
    "temperature": gettext_lazy("Temperature"),
    "throttling": gettext_lazy("Throttling"),
    "nvlink": gettext_lazy("NVLink"),
    "infiniband": gettext_lazy("InfiniBand"),
    "driver": gettext_lazy("Driver"),
}
SEVERITY = {CheckStatus.FAIL: 0, CheckStatus.WARN: 1, CheckStatus.OK: 2}


@admin_required
def inspection_list(request: HttpRequest) -> HttpResponse:
    runs = InspectionRun.objects.select_related("requested_by")
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "query": "", "every_minutes": settings.INSPECTION_EVERY_MINUTES}
    return render(request, "monitoring/inspections.html", context)


@admin_required
@require_POST
def inspection_run(request: HttpRequest) -> HttpResponse:
    inspect_nodes.delay(signed_in(request).pk)
    messages.success(request, _("Inspection started: its report is listed here once done."))
    return redirect("inspection-list")


@admin_required
def inspection_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(InspectionRun.objects.select_related("requested_by"), pk=run_id)
    results = InspectionResult.objects.filter(run=run).select_related("node")
    by_node: dict[str, dict[str, InspectionResult]] = defaultdict(dict)
    for result in results:
        by_node[result.node.name][result.check_name] = result
    names = [check.__name__ for check in CHECKS]
    rows = sorted(
        (
            (_worst(cells.values()), node, [cells.get(name) for name in names])
            for node, cells in by_node.items()
        ),
        key=lambda row: (SEVERITY[row[0]], row[1]),
    )
    context = {
        "run": run,
        "rows": rows,
        "checks": [CHECK_LABELS[name] for name in names],
    }
    return render(request, "monitoring/inspection.html", context)


def _worst(results: Iterable[InspectionResult]) -> CheckStatus:
    statuses = (CheckStatus(r.status) for r in results)
    return min(statuses, key=SEVERITY.__getitem__, default=CheckStatus.OK)
