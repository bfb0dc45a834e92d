"""Notifications: what a user is told in the portal, and where else it goes (email, webhooks)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class Level(models.TextChoices):
    INFO = "info", _("info")
    WARNING = "warning", _("warning")
    CRITICAL = "critical", _("critical")


LEVEL_RANK = {Level.INFO: 0, Level.WARNING: 1, Level.CRITICAL: 2}


def at_least(level: str, minimum: str) -> bool:
    """Whether `level` is `minimum` or more severe."""
    return LEVEL_RANK[Level(level)] >= LEVEL_RANK[Level(minimum)]


class Notification(models.Model):
    """One message to one user, shown in the portal until read."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    level = models.CharField(max_length=10, choices=Level.choices, default=Level.INFO)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=500, blank=True)
    read = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    dedupe_key = models.CharField(
        max_length=200,
        blank=True,
        help_text="An unread notification with this key is not sent twice.",
    )

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["user", "read", "-created"])]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "dedupe_key"],
                condition=Q(read=False) & ~Q(dedupe_key=""),
                name="one_unread_notification_per_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.title}"


class ChannelKind(models.TextChoices):
    EMAIL = "email", _("email")
    GENERIC = "generic", _("webhook (JSON)")
    SLACK = "slack", _("Slack")
    FEISHU = "feishu", _("Feishu / Lark")
    DINGTALK = "dingtalk", _("DingTalk")


class Channel(models.Model):
    """Where a team's notifications (or, with no team, the platform admins') also go, from a
    level up: email addresses or a webhook."""

    team = models.ForeignKey(
        "tenants.Team",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notification_channels",
        help_text="Empty: the platform admins' channel.",
    )
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=ChannelKind.choices)
    target = models.CharField(
        max_length=500, help_text="The webhook's URL, or email addresses separated by commas."
    )
    secret = models.CharField(
        max_length=200,
        blank=True,
        help_text="Feishu / DingTalk signing secret, if the bot has one.",
    )
    min_level = models.CharField(max_length=10, choices=Level.choices, default=Level.WARNING)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["team_id", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class DeliveryState(models.TextChoices):
    PENDING = "pending", _("pending")
    SENT = "sent", _("sent")
    FAILED = "failed", _("failed")


class Delivery(models.Model):
    """One message on its way out through one channel or to one user's email, with its tries."""

    channel = models.ForeignKey(
        Channel, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    email = models.CharField(max_length=254, blank=True, help_text="A user's own address.")
    level = models.CharField(max_length=10, choices=Level.choices)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=500, blank=True)
    state = models.CharField(
        max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.title} via {self.channel_id or self.email} ({self.state})"


class EmailPreference(models.Model):
    """From which level on a user also gets their notifications by email."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_preference"
    )
    min_level = models.CharField(max_length=10, choices=Level.choices, default=Level.WARNING)
    enabled = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"{self.user_id}: email from {self.min_level}"
