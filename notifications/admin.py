from __future__ import annotations

from django.contrib import admin

from notifications.models import Channel, Delivery, EmailPreference, Notification


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "kind", "min_level", "enabled"]
    list_filter = ["kind", "min_level", "enabled"]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["title", "channel", "email", "state", "attempts", "created"]
    list_filter = ["state"]
    readonly_fields = ["attempts", "last_error", "sent_at"]


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["title", "user", "level", "read", "created"]
    list_filter = ["level", "read"]


admin.site.register(EmailPreference)
