"""Pages: adding a member, profile with API tokens, admin's team list, the language switch.

The team page itself shows quotas and usage too, so it lives above the apps (portal/team_page.py).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from django.views.i18n import set_language

from base.auth import admin_required, signed_in
from base.errors import FieldErrors
from base.forms import flash_errors
from tenants.access import access_team
from tenants.actions import add_member, create_token, revoke_token, save_team
from tenants.language import remember_language, supported
from tenants.models import ApiToken, Role, Team


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    team = access_team(request.user, slug, manage=True)
    username = request.POST.get("username", "").strip()
    user = User.objects.filter(username=username, is_active=True).first()
    try:
        if user is None:
            message = _("no active user %(name)r")
            raise FieldErrors({"username": message % {"name": username[:150]}})
        add_member(
            team, user, role=request.POST.get("role", Role.MEMBER), acting_user=signed_in(request)
        )
        message = _("%(user)s added to %(team)s.")
        messages.success(request, message % {"user": username, "team": team.slug})
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
    messages.success(request, _("Token %(name)s revoked.") % {"name": token.name})
    return redirect("profile")


@admin_required
def manage_teams(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        parent_slug = request.POST.get("parent", "")
        try:
            parent = Team.objects.filter(slug=parent_slug).first() if parent_slug else None
            if parent_slug and parent is None:
                message = _("no team %(slug)r")
                raise FieldErrors({"parent": message % {"slug": parent_slug[:32]}})
            team = save_team(
                acting_user=signed_in(request),
                slug=request.POST.get("slug", "").strip(),
                name=request.POST.get("name", "").strip(),
                parent=parent,
            )
            messages.success(request, _("Team %(slug)s created.") % {"slug": team.slug})
            return redirect("manage-teams")
        except (ValidationError, FieldErrors) as exc:
            flash_errors(request, exc)
    teams = Team.objects.select_related("parent").order_by("parent__slug", "slug")
    return render(request, "tenants/manage_teams.html", {"teams": teams})


@require_POST
def language_set(request: HttpRequest) -> HttpResponse:
    """The header's language switcher: Django's `set_language` (the cookie), and for a
    signed-in person the choice stored for their later sessions and other browsers."""
    response = set_language(request)
    language = supported(request.POST.get("language", ""))
    if language and request.user.is_authenticated:
        remember_language(signed_in(request), language, request.session)
    return response
