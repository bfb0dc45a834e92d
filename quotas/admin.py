from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from base.admin_base import UnscopedAdmin
from base.auth import signed_in
from quotas.actions import delete_queue, delete_quota, save_gpu_type, save_queue, set_quota
from quotas.models import GpuType, Queue, Quota
from quotas.rules import check_queue_priority


@admin.register(GpuType)
class GpuTypeAdmin(admin.ModelAdmin):
    list_display = ["name", "product_label", "memory_gb", "gpus_per_node", "price_per_gpu_hour"]

    def save_model(self, request: HttpRequest, obj: GpuType, form: Any, change: bool) -> None:
        saved = save_gpu_type(
            acting_user=signed_in(request),
            instance=GpuType.objects.get(pk=obj.pk) if change else None,
            name=obj.name,
            product_label=obj.product_label,
            memory_gb=obj.memory_gb,
            gpus_per_node=obj.gpus_per_node,
            price_per_gpu_hour=obj.price_per_gpu_hour,
        )
        obj.pk = saved.pk


@admin.register(Quota)
class QuotaAdmin(UnscopedAdmin):
    list_display = ["team", "gpu_type", "guaranteed", "limit"]
    list_filter = ["gpu_type"]

    def save_model(self, request: HttpRequest, obj: Quota, form: Any, change: bool) -> None:
        saved = set_quota(
            obj.team,
            obj.gpu_type,
            guaranteed=obj.guaranteed,
            limit=obj.limit,
            acting_user=signed_in(request),
        )
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Quota) -> None:
        delete_quota(obj, acting_user=signed_in(request))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is not None and super().has_delete_permission(request, obj)


class QueueForm(forms.ModelForm):
    """Shows a priority out of the admins' range beside its field instead of failing in
    `save_queue`."""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("priority") is not None:
            check_queue_priority(cleaned["priority"])  # errors name their field
        return cleaned


@admin.register(Queue)
class QueueAdmin(UnscopedAdmin):
    form = QueueForm
    list_display = ["team", "name", "priority", "preemptible", "max_runtime"]

    def save_model(self, request: HttpRequest, obj: Queue, form: Any, change: bool) -> None:
        saved = save_queue(
            obj.team,
            acting_user=signed_in(request),
            instance=Queue.unscoped.get(pk=obj.pk) if change else None,
            name=obj.name,
            priority=obj.priority,
            preemptible=obj.preemptible,
            max_runtime=obj.max_runtime,
        )
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Queue) -> None:
        delete_queue(obj, acting_user=signed_in(request))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is not None and super().has_delete_permission(request, obj)
