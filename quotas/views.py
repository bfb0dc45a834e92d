"""Pages: queue editing (leads), sub-team quota split (department leads), admin GPU types/quotas."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from base.auth import admin_required, signed_in
from base.errors import FieldErrors
from base.forms import flash_errors, int_field
from quotas.actions import delete_queue, save_gpu_type, save_queue, set_quota
from quotas.models import GpuType, Queue, Quota
from tenants.access import access_team
from tenants.models import Team

MAX_GPUS = 100_000


@login_required
@require_POST
def queue_save(request: HttpRequest, slug: str) -> HttpResponse:
    team = access_team(request.user, slug, manage=True)
    data, instance = request.POST, None
    if data.get("queue_id"):
        instance = get_object_or_404(Queue.objects.for_team(team), pk=data["queue_id"])
    try:
        queue = save_queue(
            team,
            acting_user=signed_in(request),
            instance=instance,
            name=data.get("name", "").strip(),
            priority=int_field(
                data,
                "priority",
                low=settings.QUEUE_PRIORITY_MIN,
                high=settings.QUEUE_PRIORITY_MAX,
            ),
            preemptible=bool(data.get("preemptible")),
            max_runtime=int_field(data, "max_runtime", low=60, high=30 * 24 * 3600),
        )
        messages.success(request, _("Queue %(name)s saved.") % {"name": queue.name})
    except (ValidationError, FieldErrors) as exc:
        flash_errors(request, exc)
    return redirect("team-detail", slug=team.slug)


@login_required
@require_POST
def queue_delete(request: HttpRequest, slug: str, queue_id: int) -> HttpResponse:
    team = access_team(request.user, slug, manage=True)
    queue = get_object_or_404(Queue.objects.for_team(team), pk=queue_id)
    try:
        delete_queue(queue, acting_user=signed_in(request))
        messages.success(request, _("Queue %(name)s deleted.") % {"name": queue.name})
    except ValidationError as exc:
        flash_errors(request, exc)
    return redirect("team-detail", slug=team.slug)


def _save_quota(request: HttpRequest, team: Team) -> None:
    data = request.POST
    gpu_type = GpuType.objects.filter(name=data.get("gpu_type", "")).first()
    try:
        if gpu_type is None:
            raise FieldErrors({"gpu_type": _("unknown GPU type")})
        set_quota(
            team,
            gpu_type,
            guaranteed=int_field(data, "guaranteed", low=0, high=MAX_GPUS),
            limit=int_field(data, "limit", low=0, high=MAX_GPUS),
            acting_user=signed_in(request),
        )
        message = _("Quota of %(team)s for %(gpu_type)s saved.")
        messages.success(request, message % {"team": team.slug, "gpu_type": gpu_type.name})
    except (ValidationError, FieldErrors) as exc:
        flash_errors(request, exc)


@login_required
@require_POST
def subteam_quota_save(request: HttpRequest, slug: str) -> HttpResponse:
    """A department's leads split its quota among its sub-teams."""
    department = access_team(request.user, slug, manage=True)
    child = department.children.filter(slug=request.POST.get("team", "")).first()
    if child is None:
        raise PermissionDenied(_("Only sub-teams of this department can be given its quota."))
    _save_quota(request, child)
    return redirect("team-detail", slug=department.slug)


@admin_required
def manage_quotas(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        team = Team.objects.filter(slug=request.POST.get("team", "")).first()
        if team is None:
            messages.error(request, _("team: unknown team"))
        else:
            _save_quota(request, team)
        return redirect("manage-quotas")
    context = {
        "quotas": Quota.unscoped.select_related("team", "gpu_type"),
        "teams": Team.objects.all(),
        "gpu_types": GpuType.objects.all(),
    }
    return render(request, "quotas/manage_quotas.html", context)


def _price(raw: str) -> Decimal:
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise FieldErrors({"price_per_gpu_hour": _("must be a decimal number")}) from None
    if value < 0 or value.is_nan():
        raise FieldErrors({"price_per_gpu_hour": _("must be 0 or more")})
    return value


@admin_required
def manage_gpu_types(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        data: Any = request.POST
        instance = GpuType.objects.filter(name=data.get("original_name", "")).first()
        try:
            gpu_type = save_gpu_type(
                acting_user=signed_in(request),
                instance=instance,
                name=data.get("name", "").strip(),
                product_label=data.get("product_label", "").strip(),
                memory_gb=int_field(data, "memory_gb", low=1, high=4096),
                gpus_per_node=int_field(data, "gpus_per_node", low=1, high=64),
                price_per_gpu_hour=_price(data.get("price_per_gpu_hour", "0")),
            )
            messages.success(request, _("GPU type %(name)s saved.") % {"name": gpu_type.name})
            return redirect("manage-gpu-types")
        except (ValidationError, FieldErrors) as exc:
            flash_errors(request, exc)
    return render(request, "quotas/manage_gpu_types.html", {"gpu_types": GpuType.objects.all()})
