from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from base.admin_base import UnscopedAdmin
from base.auth import signed_in
from tenants.actions import add_member, check_fair_share_weight, remove_member, save_team, set_role
from tenants.models import ApiToken, ClaimMapping, Membership, Team
from tenants.oidc import ClaimMappingAdmin


class TeamForm(forms.ModelForm):
    """Shows a weight out of bounds beside its field instead of failing in `save_team`."""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("fair_share_weight") is not None:
            check_fair_share_weight(cleaned["fair_share_weight"])  # errors name their field
        return cleaned


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    form = TeamForm
    list_display = ["slug", "name", "parent", "fair_share_weight"]
    search_fields = ["slug", "name"]

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        saved = save_team(
            acting_user=signed_in(request),
            instance=Team.objects.get(pk=obj.pk) if change else None,
            slug=obj.slug,
            name=obj.name,
            parent=obj.parent,
            fair_share_weight=obj.fair_share_weight,
            image_allowlist=obj.image_allowlist,
        )
        obj.pk = saved.pk


@admin.register(Membership)
class MembershipAdmin(UnscopedAdmin):
    list_display = ["team", "user", "role"]
    list_filter = ["role", "team"]

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        actor = signed_in(request)
        if change:
            set_role(Membership.unscoped.get(pk=obj.pk), obj.role, acting_user=actor)
        else:
            obj.pk = add_member(obj.team, obj.user, role=obj.role, acting_user=actor).pk

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        remove_member(obj, acting_user=signed_in(request))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is not None and super().has_delete_permission(request, obj)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["user", "name", "prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


admin.site.register(ClaimMapping, ClaimMappingAdmin)
