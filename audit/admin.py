from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the application never updates or deletes audit rows."""

    list_display = ["seq", "at", "actor_name", "team_slug", "action", "target_type", "target_id"]
    list_filter = ["action"]
    search_fields = ["actor_name", "team_slug", "action", "target_id"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditEvent]:
        return AuditEvent.chain.all()

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
