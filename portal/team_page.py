"""The team page: members with their GPU caps, quotas against usage, queues and sub-teams.

It shows tenants, quotas and jobs together, so it lives above all three.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from base.auth import signed_in
from base.errors import FieldErrors
from base.forms import flash_errors, int_field
from billing.budgets import team_budget
from cluster.shares import team_standings
from jobs.usage import usage_against_quota
from quotas.actions import set_member_cap
from quotas.models import MemberCap, Queue, Quota
from tenants.access import access_team, can_manage_team
from tenants.actions import remove_member, set_role
from tenants.models import Membership, Role


@login_required
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    team = access_team(request.user, slug)
    caps = dict(MemberCap.objects.for_team(team).values_list("user_id", "max_gpus"))
    members = [
        (m, caps.get(m.user_id)) for m in Membership.objects.for_team(team).select_related("user")
    ]
    can_manage = can_manage_team(request.user, team)
    # Sub-teams' quotas are the department's business: shown to those who manage it.
    children = list(team.children.all()) if can_manage else []
    context = {
        "team": team,
        "members": members,
        "usage": usage_against_quota([team]),
        "budget": team_budget(team),
        "standing": team_standings(timezone.now()).get(team.slug),
        "queues": Queue.objects.for_team(team),
        "children": children,
        "child_quotas": Quota.unscoped.filter(team__in=children).select_related("team", "gpu_type"),
        "department_types": Quota.objects.for_team(team).select_related("gpu_type"),
        "can_manage": can_manage,
        "roles": Role.choices,
    }
    return render(request, "portal/team.html", context)


@login_required
@require_POST
def member_change(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    """A member's row on the team page: remove, change the role, set the GPU cap."""
    team = access_team(request.user, slug, manage=True)
    member = get_object_or_404(Membership.objects.for_team(team), user__username=username)
    actor = signed_in(request)
    try:
        if request.POST.get("remove"):
            remove_member(member, acting_user=actor)
            message = _("%(user)s removed from %(team)s.")
            messages.success(request, message % {"user": username, "team": team.slug})
            return redirect("team-detail", slug=team.slug)
        if request.POST.get("role") and request.POST["role"] != member.role:
            set_role(member, request.POST["role"], acting_user=actor)
        if "max_gpus" in request.POST:
            raw = request.POST["max_gpus"].strip()
            cap = int_field(request.POST, "max_gpus", low=0, high=10_000) if raw else None
            set_member_cap(member, cap, acting_user=actor)
        messages.success(request, _("%(user)s updated.") % {"user": username})
    except (ValidationError, FieldErrors) as exc:
        flash_errors(request, exc)
    return redirect("team-detail", slug=team.slug)
