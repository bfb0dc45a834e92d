"""`/api/v1/teams/`, `/teams/{slug}/members/`, `/me/` and `/auth/token/` (exchange, revoke)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from base.auth import signed_in
from quotas.actions import set_member_cap
from quotas.models import MemberCap
from tenants.access import access_team, can_manage_team
from tenants.actions import (
    add_member,
    create_token,
    remove_member,
    revoke_token,
    save_team,
    set_role,
)
from tenants.me import me
from tenants.models import ApiToken, Membership, Role, Team
from tenants.scoping import visible_team_ids
from tenants.serializers import (
    MemberSerializer,
    MemberWriteSerializer,
    MeSerializer,
    TeamSerializer,
    TokenRequestSerializer,
)
from tenants.tokens import TokenAuthentication
from tenants.viewsets import TenantViewSet


class TeamViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Teams are the tenants themselves: visible ones to members, all to admins."""

    serializer_class = TeamSerializer
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[Team]:
        return Team.objects.filter(id__in=visible_team_ids(self.request.user)).select_related(
            "parent"
        )

    def perform_create(self, serializer: TeamSerializer) -> None:  # type: ignore[override]
        if not self.request.user.is_staff:
            raise PermissionDenied(_("Only platform admins create teams."))
        serializer.instance = save_team(
            acting_user=signed_in(self.request), **serializer.validated_data
        )

    def perform_update(self, serializer: TeamSerializer) -> None:  # type: ignore[override]
        team, data, user = serializer.instance, serializer.validated_data, self.request.user
        assert team is not None
        if not can_manage_team(user, team):
            raise PermissionDenied(_("Only the team's leads and platform admins can change it."))
        parent = data.get("parent", team.parent)
        if parent != team.parent and not user.is_staff:
            raise PermissionDenied(_("Only platform admins move teams between departments."))
        serializer.instance = save_team(
            acting_user=user,  # type: ignore[arg-type]
            instance=team,
            slug=team.slug,  # the namespace is named after it
            name=data.get("name", team.name),
            parent=parent,
            fair_share_weight=data.get("fair_share_weight", team.fair_share_weight),
            image_allowlist=data.get("image_allowlist", team.image_allowlist),
        )


class MemberViewSet(TenantViewSet):
    """Members of one team; its leads add, change and remove them."""

    model = Membership
    related = ("user", "team")
    serializer_class = MemberSerializer
    lookup_field = "user__username"
    lookup_url_kwarg = "username"

    def _context(self, team: Team) -> dict[str, Any]:
        caps = dict(MemberCap.objects.for_team(team).values_list("user_id", "max_gpus"))
        return {"caps": caps}

    def list(self, request: Request, team_slug: str) -> Response:
        team = access_team(request.user, team_slug)
        page = self.paginate_queryset(self.get_queryset())
        data = MemberSerializer(page, many=True, context=self._context(team)).data
        return self.get_paginated_response(data)

    def retrieve(self, request: Request, team_slug: str, username: str) -> Response:
        member = self.get_object()
        return Response(MemberSerializer(member, context=self._context(member.team)).data)

    @extend_schema(request=MemberWriteSerializer, responses={201: MemberSerializer})
    def create(self, request: Request, team_slug: str) -> Response:
        team = access_team(request.user, team_slug, manage=True)
        body = MemberWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        username = body.validated_data.get("username")
        if not username:
            return Response({"username": [_("This field is required.")]}, status=400)
        user = User.objects.filter(username=username, is_active=True).first()
        if user is None:
            message = _("no active user %(name)r") % {"name": username}
            return Response({"username": [message]}, status=400)
        actor = signed_in(request)
        member = add_member(
            team, user, role=body.validated_data.get("role", Role.MEMBER), acting_user=actor
        )
        if body.validated_data.get("max_gpus") is not None:
            set_member_cap(member, body.validated_data["max_gpus"], acting_user=actor)
        return Response(MemberSerializer(member, context=self._context(team)).data, status=201)

    @extend_schema(request=MemberWriteSerializer, responses={200: MemberSerializer})
    def partial_update(self, request: Request, team_slug: str, username: str) -> Response:
        member = self.get_object()
        access_team(request.user, team_slug, manage=True)
        body = MemberWriteSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        actor = signed_in(request)
        if "role" in body.validated_data:
            set_role(member, body.validated_data["role"], acting_user=actor)
        if "max_gpus" in body.validated_data:
            set_member_cap(member, body.validated_data["max_gpus"], acting_user=actor)
        return Response(MemberSerializer(member, context=self._context(member.team)).data)

    def destroy(self, request: Request, team_slug: str, username: str) -> Response:
        member = self.get_object()
        access_team(request.user, team_slug, manage=True)
        remove_member(member, acting_user=signed_in(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class MeView(APIView):
    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        return Response(me(signed_in(request)))


class TokenView(APIView):
    """Exchange a username and password for a personal API token, shown once (POST); revoke
    the token the request is made with (DELETE, `gpuctl logout`).

    Wrong passwords count towards the login lockout (django-axes, through `authenticate`), which
    answers 429 once a username has failed too often from one address.
    """

    throttle_classes = [AnonRateThrottle]

    def _revoking(self) -> bool:
        # No request while the schema is generated.
        return getattr(self.request, "method", None) == "DELETE"

    def get_authenticators(self) -> list[BaseAuthentication]:
        # The exchange takes a password, never a session or a token; a revocation its token.
        return [TokenAuthentication()] if self._revoking() else []

    def get_permissions(self) -> list[permissions.BasePermission]:
        return [permissions.IsAuthenticated() if self._revoking() else permissions.AllowAny()]

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request) -> Response:
        assert isinstance(request.auth, ApiToken)  # TokenAuthentication alone let it in
        revoke_token(request.auth, acting_user=signed_in(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=TokenRequestSerializer, responses={201: dict})
    def post(self, request: Request) -> Response:
        body = TokenRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = authenticate(
            request._request,
            username=body.validated_data["username"],
            password=body.validated_data["password"],
        )
        if user is None:
            return Response({"detail": _("Wrong username or password.")}, status=401)
        token, raw = create_token(
            user,
            body.validated_data["name"],
            expires_in_days=body.validated_data.get("expires_in_days"),
        )
        return Response(
            {
                "token": raw,
                "name": token.name,
                "prefix": token.prefix,
                "expires_at": token.expires_at,
            },
            status=status.HTTP_201_CREATED,
        )
