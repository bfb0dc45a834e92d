"""Alert pages: the alerts a user may see; the admins' rules and silences, and acknowledging."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from base.auth import admin_required, signed_in
from base.errors import FieldErrors
from base.forms import flash_errors
from monitoring.alerts import actions
from monitoring.alerts.access import visible_alerts
from monitoring.alerts.figures import PORTAL_FIGURES
from monitoring.models import LIVE_ALERT_STATES, Alert, AlertRule, Scope, Silence

PAGE_SIZE = 100


@login_required
def alert_list(request: HttpRequest) -> HttpResponse:
    alerts = visible_alerts(request.user)
    shown = request.GET.get("state", "live")
    if shown == "live":
        alerts = alerts.filter(state__in=LIVE_ALERT_STATES)
    page = Paginator(alerts, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "monitoring/alerts.html",
        {"page": page, "shown": shown, "query": f"state={shown}"},
    )


@admin_required
@require_POST
def alert_acknowledge(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = get_object_or_404(Alert.objects.select_related("rule", "team"), pk=alert_id)
    try:
        actions.acknowledge(alert, acting_user=signed_in(request))
        messages.success(request, _("Alert acknowledged."))
    except FieldErrors as exc:
        flash_errors(request, exc)
    return redirect("alert-list")


@admin_required
def rule_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        rule = None
        if request.POST.get("id"):
            rule = get_object_or_404(AlertRule, pk=_id(request.POST["id"]))
        try:
            if request.POST.get("action") == "delete" and rule is not None:
                actions.delete_rule(rule, acting_user=signed_in(request))
                messages.success(request, _("Rule deleted."))
            else:
                actions.save_rule(rule, request.POST.dict(), acting_user=signed_in(request))
                messages.success(request, _("Rule saved."))
        except FieldErrors as exc:
            flash_errors(request, exc)
        return redirect("alert-rules")
    context = {
        "rules": AlertRule.objects.all(),
        "scopes": Scope.choices,
        "figures": sorted(PORTAL_FIGURES.items()),
    }
    return render(request, "monitoring/rules.html", context)


@admin_required
def silence_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        try:
            if request.POST.get("action") == "end":
                silence = get_object_or_404(Silence, pk=_id(request.POST.get("id", "")))
                actions.end_silence(silence, acting_user=signed_in(request))
                messages.success(request, _("Silence ended."))
            else:
                actions.add_silence(request.POST.dict(), acting_user=signed_in(request))
                messages.success(request, _("Silence added."))
        except FieldErrors as exc:
            flash_errors(request, exc)
        return redirect("alert-silences")
    now = timezone.now()
    context = {
        "active": Silence.objects.filter(ends_at__gt=now).select_related("rule", "created_by"),
        "rules": AlertRule.objects.all(),
    }
    return render(request, "monitoring/silences.html", context)


def _id(raw: str) -> int:
    return int(raw) if raw.isdigit() else 0
