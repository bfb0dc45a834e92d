"""Quota what-if pages: the form and past runs (`manage/whatif/`), and one run's figures side by
side, linkable by id, refreshing itself while the replay runs. A run is seen by whoever asked
and by platform admins; anyone else gets 404. Its figures show only the teams the reader may
see (`tenants.scoping.visible_team_ids`): the cluster's and the GPU types' are everyone's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from base.auth import signed_in
from base.errors import FieldErrors
from base.forms import flash_errors, int_field
from cluster.models import WhatIf, WhatIfState
from cluster.whatif_request import (
    MAX_GPUS,
    MAX_WINDOW_DAYS,
    Ask,
    changeable_teams,
    may_ask,
    request_whatif,
)
from quotas.models import GpuType, Quota
from scheduler import QuotaInfo
from tenants.models import Team
from tenants.scoping import visible_team_ids

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tenants.scoping import AnyUser

PAGE_SIZE = 25
DEFAULT_DAYS = 14
REFRESH_S = 3
FORM_TIME = "%Y-%m-%dT%H:%M"


def _moment(data: QueryDict, name: str) -> datetime:
    raw = data.get(name, "").strip()
    value = parse_datetime(raw) if raw else None
    if value is None:
        message = _("must be a date and time such as 2026-03-01T12:00 (UTC), got %(value)r")
        raise FieldErrors({name: message % {"value": raw[:30]}})
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


def parse_ask(data: QueryDict) -> Ask:
    """The form's fields: `window_start`, `window_end`, `guaranteed:<team>:<type>` and
    `limit:<team>:<type>` for each quota row, `gpus:<type>` for each GPU type."""
    quotas = []
    for name in data:
        kind, _sep, key = name.partition(":")
        if kind == "guaranteed" and key.count(":") == 1:
            team, gpu_type = key.split(":")
            guaranteed = int_field(data, name, low=0, high=MAX_GPUS)
            limit = int_field(data, f"limit:{key}", low=0, high=MAX_GPUS)
            quotas.append(QuotaInfo(team, gpu_type, guaranteed, limit))
    gpus = {
        name.partition(":")[2]: int_field(data, name, low=-MAX_GPUS, high=MAX_GPUS)
        for name in data
        if name.startswith("gpus:")
    }
    return Ask(_moment(data, "window_start"), _moment(data, "window_end"), tuple(quotas), gpus)


def _quota_rows(user: AnyUser, posted: QueryDict | None) -> list[dict[str, Any]]:
    """A row per team the user may change and GPU type: today's quota and the form's values
    (today's, or what was posted when the form comes back with an error)."""
    teams = list(changeable_teams(user).order_by("slug").values_list("slug", flat=True))
    types = list(GpuType.objects.values_list("name", flat=True))
    quotas = Quota.unscoped.filter(team__slug__in=teams)
    current = {
        (team, gpu_type): (guaranteed, limit)
        for team, gpu_type, guaranteed, limit in quotas.values_list(
            "team__slug", "gpu_type__name", "guaranteed", "limit"
        )
    }
    values = posted or QueryDict()
    rows = []
    for team in teams:
        for gpu_type in types:
            guaranteed, limit = current.get((team, gpu_type), (0, 0))
            key = f"{team}:{gpu_type}"
            row: dict[str, Any] = {"team": team, "gpu_type": gpu_type, "key": key}
            row |= {"guaranteed": guaranteed, "limit": limit}
            row["new_guaranteed"] = values.get(f"guaranteed:{key}", str(guaranteed))
            row["new_limit"] = values.get(f"limit:{key}", str(limit))
            rows.append(row)
    return rows


def _form_context(user: User, posted: QueryDict | None, page: str | None) -> dict[str, Any]:
    end = timezone.now().replace(second=0, microsecond=0)
    start = end - timedelta(days=DEFAULT_DAYS)
    values = posted or QueryDict()
    runs = WhatIf.objects.select_related("requested_by")
    if not user.is_staff:
        runs = runs.filter(requested_by=user)
    sizes = GpuType.objects.values_list("name", "gpus_per_node")
    return {
        "rows": _quota_rows(user, posted),
        "may_ask": may_ask(user),
        "gpu_types": list(sizes) if user.is_staff else [],
        "window_start": values.get("window_start", start.strftime(FORM_TIME)),
        "window_end": values.get("window_end", end.strftime(FORM_TIME)),
        "max_days": MAX_WINDOW_DAYS,
        "page": Paginator(runs, PAGE_SIZE).get_page(page),
        "query": "",
    }


@login_required
def whatif_list(request: HttpRequest) -> HttpResponse:
    """The form (for admins and department leads) and the runs the reader may see."""
    user = signed_in(request)
    if request.method == "POST":
        try:
            whatif = request_whatif(parse_ask(request.POST), acting_user=user, now=timezone.now())
        except FieldErrors as exc:
            flash_errors(request, exc)
            context = _form_context(user, request.POST, None)
            return render(request, "cluster/whatif_list.html", context, status=400)
        return redirect("whatif-detail", whatif_id=whatif.pk)
    return render(
        request, "cluster/whatif_list.html", _form_context(user, None, request.GET.get("page"))
    )


def access_whatif(user: AnyUser, whatif_id: int) -> WhatIf:
    """The run, for whoever asked and platform admins; 404 for everyone else alike."""
    runs = WhatIf.objects.select_related("requested_by")
    whatif = runs.filter(pk=whatif_id).first()
    if whatif is None or not (user.is_staff or whatif.requested_by_id == user.pk):
        raise Http404(_("No such what-if."))
    return whatif


def _minutes(figures: dict[str, Any]) -> dict[str, Any]:
    """The figures with their waits in minutes too, as the page shows them."""
    shown = dict(figures)
    for key in ("wait_p50_s", "wait_p90_s"):
        if key in figures:
            shown[key.replace("_s", "_min")] = figures[key] / 60
    return shown


def _rows(section: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [
        {"name": name, "current": _minutes(pair["current"]), "changed": _minutes(pair["changed"])}
        for name, pair in section.items()
    ]


@login_required
@require_GET
def whatif_detail(request: HttpRequest, whatif_id: int) -> HttpResponse:
    user = signed_in(request)
    whatif = access_whatif(user, whatif_id)
    results: dict[str, Any] = whatif.results or {}
    visible = set(Team.objects.filter(id__in=visible_team_ids(user)).values_list("slug", flat=True))
    teams = {name: pair for name, pair in results.get("teams", {}).items() if name in visible}
    changes = [c for c in whatif.changes.get("quotas", []) if c["team"] in visible]
    context = {
        "whatif": whatif,
        "running": whatif.state in (WhatIfState.QUEUED, WhatIfState.RUNNING),
        "refresh_s": REFRESH_S,
        "quota_changes": changes,
        "gpu_changes": sorted(whatif.changes.get("gpus", {}).items()),
        "teams": _rows(teams),
        "gpu_types": _rows(results.get("gpu_types", {})),
        "cluster": results.get("cluster", {}).get("all"),
    }
    return render(request, "cluster/whatif_detail.html", context)
