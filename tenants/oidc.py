"""Single sign-on with the organisation's OpenID Connect provider, beside local accounts.

mozilla-django-oidc runs the authorization code flow (with PKCE and a nonce); this module
decides who may come in. The provider's team claim (OIDC_TEAM_CLAIM, e.g. `groups`) is looked
up in the ClaimMapping rows platform admins keep: each matching row makes the user a member of
its team with its role, at every sign-in. Someone whose claim matches no row is refused and
the refusal audited; no account is created for them. An account is tied to the provider's
subject (`sub`), never to a local username that happens to be the same.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from audit.record import record
from base.admin_base import UnscopedAdmin
from base.auth import signed_in
from base.roles import Role
from tenants.actions import add_member, set_role
from tenants.models import ClaimMapping, Membership, OidcIdentity, Team

log = logging.getLogger(__name__)
RANK: dict[str, int] = {Role.MEMBER: 0, Role.LEAD: 1}  # several rows for one team: the higher role


def sign_in_options(request: HttpRequest) -> dict[str, bool]:
    """Template context: whether the login page offers the organisation's sign-in."""
    return {"oidc_enabled": settings.OIDC_ENABLED}


class SignInView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider; 404 while single sign-on is not configured."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404
        return super().get(request)


class CallbackView(OIDCAuthenticationCallbackView):
    """The provider's answer; 404 while single sign-on is not configured."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404
        return super().get(request)


def claim_values(claims: dict[str, Any]) -> list[str]:
    """The team claim's values: providers send a list, or one string."""
    found = claims.get(settings.OIDC_TEAM_CLAIM)
    if isinstance(found, str):
        return [found]
    if isinstance(found, list):
        return [str(value) for value in found]
    return []


def mapped_roles(values: Iterable[str]) -> dict[Team, str]:
    """Each team the claim's values map to, with the highest role any of them gives."""
    roles: dict[Team, str] = {}
    rows = ClaimMapping.unscoped.filter(value__in=list(values)).select_related("team")
    for row in rows:
        if row.team not in roles or RANK[row.role] > RANK[roles[row.team]]:
            roles[row.team] = row.role
    return roles


def join_mapped_teams(user: User, roles: dict[Team, str]) -> None:
    """Make the user a member of each mapped team with its role (audited as any change)."""
    for team, role in roles.items():
        membership = Membership.objects.for_team(team).filter(user=user).first()
        if membership is None:
            add_member(team, user, role=role, acting_user=user)
        elif membership.role != role:
            set_role(membership, role, acting_user=user)


class OrganisationBackend(OIDCAuthenticationBackend):
    """Signs in the provider's users whose team claim an admin mapped to a team."""

    roles: dict[Team, str]

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        try:
            return super().authenticate(request, **kwargs)
        except SuspiciousOperation as exc:  # a token failing its checks: back to the login page
            log.warning("single sign-on refused: %s", exc)
            return None

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the ID token was issued to another client")
        return payload

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        if not claims.get("sub"):
            return False
        self.roles = mapped_roles(claim_values(claims))
        if not self.roles:
            self._refuse(claims)
            return False
        return True

    def _refuse(self, claims: dict[str, Any]) -> None:
        name = self._username(claims)
        with transaction.atomic():
            record(
                "auth.oidc_refused",
                actor=User(username=name),  # unsaved: no account is claimed
                team=None,
                after={"subject": claims["sub"], "values": claim_values(claims)},
            )
        message = _(
            "Your organisation's account %(name)s belongs to no team here: ask a platform "
            "admin to map one of your groups to a team."
        )
        messages.error(self.request, message % {"name": name})

    @staticmethod
    def _username(claims: dict[str, Any]) -> str:
        max_length = User._meta.get_field("username").max_length or 150
        return str(claims.get(settings.OIDC_USERNAME_CLAIM) or claims["sub"])[:max_length]

    def filter_users_by_claims(self, claims: dict[str, Any]) -> QuerySet[User]:
        # A deactivated account is found too: the callback then refuses it for being inactive.
        return User.objects.filter(oidc_identity__subject=claims["sub"])

    def create_user(self, claims: dict[str, Any]) -> User:
        username = self._username(claims)
        if User.objects.filter(username=username).exists():  # a local account's, or another's
            username = f"{username[:140]}-{claims['sub'][:8]}"
        with transaction.atomic():
            user = User.objects.create_user(username, email=claims.get("email", ""))
            OidcIdentity.objects.create(user=user, subject=claims["sub"])
            join_mapped_teams(user, self.roles)
        return user

    def update_user(self, user: User, claims: dict[str, Any]) -> User:
        with transaction.atomic():
            join_mapped_teams(user, self.roles)
        return user


def save_claim_mapping(
    mapping: ClaimMapping, *, acting_user: User, before: dict[str, Any] | None
) -> ClaimMapping:
    """Create or change a claim → team/role mapping (platform admins)."""
    with transaction.atomic():
        mapping.save()
        record(
            "oidc.mapping_save",
            actor=acting_user,
            team=mapping.team,
            target=mapping,
            before=before,
            after=_fields(mapping),
        )
    return mapping


def delete_claim_mapping(mapping: ClaimMapping, *, acting_user: User) -> None:
    """Remove a mapping: who came in through it keeps their membership until a lead removes it."""
    with transaction.atomic():
        record(
            "oidc.mapping_delete",
            actor=acting_user,
            team=mapping.team,
            target=mapping,
            before=_fields(mapping),
        )
        mapping.delete()


def _fields(mapping: ClaimMapping) -> dict[str, Any]:
    return {"value": mapping.value, "team": mapping.team.slug, "role": mapping.role}


class ClaimMappingAdmin(UnscopedAdmin):
    """Platform admins keep the mappings in the Django admin; every change is audited."""

    list_display = ["value", "team", "role"]
    search_fields = ["value", "team__slug"]

    def save_model(self, request: HttpRequest, obj: ClaimMapping, form: Any, change: bool) -> None:
        before = None
        if change:
            stored = ClaimMapping.unscoped.select_related("team").get(pk=obj.pk)
            before = _fields(stored)
        save_claim_mapping(obj, acting_user=signed_in(request), before=before)

    def delete_model(self, request: HttpRequest, obj: ClaimMapping) -> None:
        delete_claim_mapping(obj, acting_user=signed_in(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ClaimMapping]) -> None:
        for mapping in queryset.select_related("team"):
            delete_claim_mapping(mapping, acting_user=signed_in(request))
