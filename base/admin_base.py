"""Django admin plumbing: tenant-owned models are listed unscoped, and saves go through actions.

Saving through the actions keeps the admin inside the same validation and audit trail as the
pages and the API.
"""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest


class UnscopedAdmin(admin.ModelAdmin):
    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return self.model.unscoped.all()
