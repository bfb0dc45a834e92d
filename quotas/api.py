"""`/api/v1/gpu-types/`, `/quotas/` and `/queues/`."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils.translation import gettext as _
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from base.auth import signed_in
from quotas.actions import delete_queue, delete_quota, save_gpu_type, save_queue, set_quota
from quotas.models import GpuType, Queue, Quota
from quotas.serializers import GpuTypeSerializer, QueueSerializer, QuotaSerializer
from tenants.access import access_team, can_manage_team, is_lead
from tenants.models import Team
from tenants.viewsets import TenantViewSet


class IsAdminOrReadOnly(permissions.BasePermission):
    def has_permission(self, request: Request, view: object) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return bool(request.user and request.user.is_authenticated)
        return bool(request.user and request.user.is_staff)


class GpuTypeViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """GPU types are platform-wide: everyone signed in reads them, admins change them."""

    serializer_class = GpuTypeSerializer
    permission_classes = [IsAdminOrReadOnly]
    lookup_field = "name"

    def get_queryset(self) -> QuerySet[GpuType]:
        return GpuType.objects.all()

    def perform_create(self, serializer: GpuTypeSerializer) -> None:  # type: ignore[override]
        serializer.instance = save_gpu_type(
            acting_user=signed_in(self.request), **serializer.validated_data
        )

    def perform_update(self, serializer: GpuTypeSerializer) -> None:  # type: ignore[override]
        current = GpuTypeSerializer(serializer.instance).data
        serializer.instance = save_gpu_type(
            acting_user=signed_in(self.request),
            instance=serializer.instance,
            **{**current, **serializer.validated_data},
        )


def may_set_quota(user: Any, team: Team) -> bool:
    """Admins set any quota; a department's leads split its quota among its sub-teams."""
    return bool(user.is_staff) or (team.parent is not None and is_lead(user, team.parent))


def _team(user: Any, data: dict[str, Any]) -> Team:
    return access_team(user, str(data["team"]["slug"]))


class QuotaViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    model = Quota
    related = ("team", "team__parent", "gpu_type")
    serializer_class = QuotaSerializer

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if team := self.request.query_params.get("team"):
            queryset = queryset.filter(team__slug=team)
        return queryset

    def _save(self, request: Request, instance: Quota | None) -> Response:
        body = QuotaSerializer(instance, data=request.data, partial=instance is not None)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        team = _team(request.user, data) if "team" in data else instance.team  # type: ignore[union-attr]
        if not may_set_quota(request.user, team):
            raise PermissionDenied(_("Only platform admins and the department's leads set quotas."))
        quota = set_quota(
            team,
            data.get("gpu_type") or instance.gpu_type,  # type: ignore[union-attr]
            guaranteed=data.get("guaranteed", instance.guaranteed if instance else 0),
            limit=data.get("limit", instance.limit if instance else 0),
            acting_user=signed_in(request),
        )
        code = status.HTTP_200_OK if instance else status.HTTP_201_CREATED
        return Response(QuotaSerializer(quota).data, status=code)

    def create(self, request: Request) -> Response:
        return self._save(request, None)

    def partial_update(self, request: Request, pk: str) -> Response:
        return self._save(request, self.get_object())

    def perform_destroy(self, instance: Quota) -> None:
        if not may_set_quota(self.request.user, instance.team):
            raise PermissionDenied(_("Only platform admins and the department's leads set quotas."))
        delete_quota(instance, acting_user=signed_in(self.request))


class QueueViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    model = Queue
    related = ("team",)
    serializer_class = QueueSerializer

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if team := self.request.query_params.get("team"):
            queryset = queryset.filter(team__slug=team)
        return queryset

    def _save(self, request: Request, instance: Queue | None) -> Response:
        body = QueueSerializer(instance, data=request.data, partial=instance is not None)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        team = _team(request.user, data) if "team" in data else instance.team  # type: ignore[union-attr]
        if instance is not None and team != instance.team:
            raise PermissionDenied(_("A queue cannot move between teams."))
        if not can_manage_team(request.user, team):
            raise PermissionDenied(
                _("Only the team's leads and platform admins change its queues.")
            )
        queue = save_queue(
            team,
            acting_user=signed_in(request),
            instance=instance,
            name=data.get("name", instance.name if instance else ""),
            priority=data.get("priority", instance.priority if instance else 100),
            preemptible=data.get("preemptible", instance.preemptible if instance else False),
            max_runtime=data.get("max_runtime", instance.max_runtime if instance else 86400),
        )
        code = status.HTTP_200_OK if instance else status.HTTP_201_CREATED
        return Response(QueueSerializer(queue).data, status=code)

    def create(self, request: Request) -> Response:
        return self._save(request, None)

    def partial_update(self, request: Request, pk: str) -> Response:
        return self._save(request, self.get_object())

    def perform_destroy(self, instance: Queue) -> None:
        if not can_manage_team(self.request.user, instance.team):
            raise PermissionDenied(
                _("Only the team's leads and platform admins change its queues.")
            )
        delete_queue(instance, acting_user=signed_in(self.request))
