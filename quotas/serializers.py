"""API shapes of GPU types, quotas and queues."""

from rest_framework import serializers

from quotas.models import GpuType, Queue, Quota


class GpuTypeSerializer(serializers.ModelSerializer[GpuType]):
    class Meta:
        model = GpuType
        fields = ["name", "product_label", "memory_gb", "gpus_per_node", "price_per_gpu_hour"]


class QuotaSerializer(serializers.ModelSerializer[Quota]):
    id = serializers.IntegerField(read_only=True)
    team = serializers.CharField(source="team.slug")
    gpu_type = serializers.SlugRelatedField(slug_field="name", queryset=GpuType.objects.all())

    class Meta:
        model = Quota
        fields = ["id", "team", "gpu_type", "guaranteed", "limit"]
        validators: list[object] = []  # uniqueness is an upsert in quotas.actions.set_quota


class QueueSerializer(serializers.ModelSerializer[Queue]):
    id = serializers.IntegerField(read_only=True)
    team = serializers.CharField(source="team.slug")

    class Meta:
        model = Queue
        fields = ["id", "team", "name", "priority", "preemptible", "max_runtime"]
        validators: list[object] = []  # checked by full_clean in quotas.actions.save_queue
