"""Pages: team (members, quotas, queues), profile with API tokens, and admin's team list."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from jobs.usage import usage_against_quota
from portal.auth import signed_in
from portal.errors import FieldErrors
from portal.forms import flash_errors, int_field
from quotas.actions import set_member_cap
from quotas.models import MemberCap, Queue, Quota
from tenants.access import access_team, can_manage_team
from tenants.actions import (
    add_member,
    create_token,
    remove_member,
    revoke_token,
    save_team,
    set_role,
)
from tenants.models import ApiToken, Membership, Role, Team


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
        "queues": Queue.objects.for_team(team),
        "children": children,
        "child_quotas": Quota.unscoped.filter(team__in=children).select_related("team", "gpu_type"),
        "department_types": Quota.objects.for_team(team).select_related("gpu_type"),
        "can_manage": can_manage,
        "roles": Role.choices,
    }
    return render(request, "tenants/team.html", context)


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    team = access_team(request.user, slug, manage=True)
    username = request.POST.get("username", "").strip()
    user = User.objects.filter(username=username, is_active=True).first()
    try:
        if user is None:
            raise FieldErrors({"username": f"no active user {username[:150]!r}"})
        add_member(
            team, user, role=request.POST.get("role", Role.MEMBER), acting_user=signed_in(request)
        )
        messages.success(request, f"{username} added to {team.slug}.")
    except (ValidationError, FieldErrors) as exc:
        flash_errors(request, exc)
    return redirect("team-detail", slug=team.slug)


@login_required
@require_POST
def member_change(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    team = access_team(request.user, slug, manage=True)
    member = get_object_or_404(Membership.objects.for_team(team), user__username=username)
    actor = signed_in(request)
    try:
        if request.POST.get("remove"):
            remove_member(member, acting_user=actor)
            messages.success(request, f"{username} removed from {team.slug}.")
            return redirect("team-detail", slug=team.slug)
        if request.POST.get("role") and request.POST["role"] != member.role:
            set_role(member, request.POST["role"], acting_user=actor)
        if "max_gpus" in request.POST:
            raw = request.POST["max_gpus"].strip()
            cap = int_field(request.POST, "max_gpus", low=0, high=10_000) if raw else None
            set_member_cap(member, cap, acting_user=actor)
        messages.success(request, f"{username} updated.")
    except (ValidationError, FieldErrors) as exc:
        flash_errors(request, exc)
    return redirect("team-detail", slug=team.slug)


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    new_token = None
    if request.method == "POST":
        try:
            _, new_token = create_token(signed_in(request), request.POST.get("name", ""))
        except ValidationError as exc:
            flash_errors(request, exc)
    tokens = ApiToken.objects.filter(user=signed_in(request))
    return render(request, "tenants/profile.html", {"tokens": tokens, "new_token": new_token})


@login_required
@require_POST
def token_revoke(request: HttpRequest, prefix: str) -> HttpResponse:
    token = get_object_or_404(ApiToken, user=request.user, prefix=prefix, revoked_at__isnull=True)
    revoke_token(token, acting_user=signed_in(request))
    messages.success(request, f"Token {token.name} revoked.")
    return redirect("profile")


@staff_member_required
def manage_teams(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        parent_slug = request.POST.get("parent", "")
        try:
            parent = Team.objects.filter(slug=parent_slug).first() if parent_slug else None
            if parent_slug and parent is None:
                raise FieldErrors({"parent": f"no team {parent_slug[:32]!r}"})
            team = save_team(
                acting_user=signed_in(request),
                slug=request.POST.get("slug", "").strip(),
                name=request.POST.get("name", "").strip(),
                parent=parent,
            )
            messages.success(request, f"Team {team.slug} created.")
            return redirect("manage-teams")
        except (ValidationError, FieldErrors) as exc:
            flash_errors(request, exc)
    teams = Team.objects.select_related("parent").order_by("parent__slug", "slug")
    return render(request, "tenants/manage_teams.html", {"teams": teams})
