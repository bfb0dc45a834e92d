from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from base.admin_base import UnscopedAdmin
from jobs.models import Job


@admin.register(Job)
class JobAdmin(UnscopedAdmin):
    """Read-only: jobs change state through actions and the controller, never by hand."""

    list_display = ["id", "name", "team", "owner", "state", "gpu_type", "nodes", "gpus_per_node"]
    list_filter = ["state", "gpu_type", "team"]
    search_fields = ["name"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
