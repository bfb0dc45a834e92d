"""`/api/v1/nodes/`: the inventory for platform admins, with cordon and uncordon."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from base.auth import signed_in
from cluster import connect
from cluster.actions import set_cordon
from cluster.backend import Unavailable
from cluster.models import Gpu, Node


class GpuSerializer(serializers.ModelSerializer[Gpu]):
    class Meta:
        model = Gpu
        fields = ["index", "uuid", "healthy", "last_xid"]


class NodeSerializer(serializers.ModelSerializer[Node]):
    gpu_type = serializers.CharField(source="gpu_type.name", default=None)
    gpus = GpuSerializer(many=True, read_only=True)

    class Meta:
        model = Node
        fields = [
            "name",
            "gpu_type",
            "product_label",
            "gpu_capacity",
            "gpu_allocatable",
            "rack",
            "nvlink_domain",
            "ready",
            "cordoned",
            "cordon_reason",
            "last_heartbeat",
            "labels",
            "gpus",
        ]


class CordonSerializer(serializers.Serializer[dict[str, str]]):
    reason = serializers.CharField(max_length=255, required=False, default="", allow_blank=True)


class NodeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Nodes are platform-wide: admins only."""

    serializer_class = NodeSerializer
    permission_classes = [permissions.IsAdminUser]
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    def get_queryset(self) -> QuerySet[Node]:
        return Node.objects.select_related("gpu_type").prefetch_related("gpus")

    def _cordon(self, request: Request, cordon: bool) -> Response:
        body = CordonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            node = set_cordon(
                self.get_object(),
                cordon,
                reason=body.validated_data["reason"],
                acting_user=signed_in(request),
                backend=connect.backend(),
            )
        except Unavailable as exc:
            return Response(
                {"detail": f"cluster API unavailable: {exc}"},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        return Response(NodeSerializer(node).data)

    @extend_schema(request=CordonSerializer, responses=NodeSerializer)
    @action(detail=True, methods=["post"])
    def cordon(self, request: Request, name: str) -> Response:
        return self._cordon(request, True)

    @extend_schema(request=CordonSerializer, responses=NodeSerializer)
    @action(detail=True, methods=["post"])
    def uncordon(self, request: Request, name: str) -> Response:
        return self._cordon(request, False)
