"""`/usage/efficiency/`: GPU-hours allocated against used, waste and its cost, energy, by month.
A lead sees their team by member, a member their own jobs (with the right-sizing hint), an
admin every team. Those who manage a team also set its idle policy there
(`/usage/efficiency/idle-policy/<slug>/`, audited)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from base.auth import signed_in
from base.errors import FieldErrors
from billing.efficiency import EFFICIENCY_GROUPS, efficiency_report
from billing.efficiency_api import parse_group
from billing.prices import currency
from billing.query import parse_month
from billing.usage import current_month, led_team_ids
from monitoring.idle_policy import idle_rules, parse_idle_rule, set_idle_policy
from monitoring.models import IdleAction
from tenants.access import access_team
from tenants.models import Team


def _default_group(request: HttpRequest) -> str:
    if request.user.is_staff:
        return "team"
    return "user" if led_team_ids(request.user) else "job"


def _policy_teams(request: HttpRequest, team: Team | None) -> list[Team]:
    """The teams whose idle policy the page offers to set: those the user leads (an admin, the
    team asked for)."""
    if request.user.is_staff:
        return [team] if team is not None else []
    led = Team.objects.filter(pk__in=led_team_ids(request.user)).order_by("slug")
    return [t for t in led if team is None or t == team]


@login_required
def efficiency_page(request: HttpRequest) -> HttpResponse:
    return _page(request)


def _page(request: HttpRequest, policy_errors: dict[str, str] | None = None) -> HttpResponse:
    """The page; 400 when the query or a policy form was refused (its errors shown)."""
    params = {k: v for k, v in request.GET.items() if v}
    default = _default_group(request)
    try:
        period, group, error = parse_month(params), parse_group(params, default), ""
    except FieldErrors as exc:
        period, group, error = current_month(), default, str(exc)
    slug = request.GET.get("team", "")
    team = access_team(request.user, slug) if slug else None
    report = efficiency_report(request.user, period, group, team=team)
    policy_teams = _policy_teams(request, team)
    rules = idle_rules([t.pk for t in policy_teams])
    previous = period.start - timedelta(days=1)
    context: dict[str, Any] = {
        "report": report,
        "total": report.total.as_dict(),
        "currency": currency(),
        "month": period.start.strftime("%Y-%m"),
        "previous": previous.strftime("%Y-%m"),
        "next": period.end.strftime("%Y-%m"),
        "group_choices": EFFICIENCY_GROUPS,
        "team": slug,
        "error": error,
        "policies": [(t, rules[t.pk]) for t in policy_teams],
        "actions": IdleAction.choices,
        "policy_errors": policy_errors or {},
    }
    status = 400 if error or policy_errors else 200
    return render(request, "billing/efficiency.html", context, status=status)


@login_required
@require_POST
def idle_policy_save(request: HttpRequest, slug: str) -> HttpResponse:
    """Set a team's idle policy (its leads and platform admins)."""
    team = access_team(request.user, slug, manage=True)
    try:
        rule = parse_idle_rule(request.POST.dict())
    except FieldErrors as exc:
        return _page(request, exc.errors)
    set_idle_policy(team, rule, acting_user=signed_in(request))
    messages.success(request, _("Idle policy of %(team)s saved.") % {"team": team.slug})
    return redirect(f"{reverse('efficiency')}?team={team.slug}")
