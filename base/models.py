"""IdempotencyKey: a client's key for a creating request, and the first answer it got."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class IdempotencyKey(models.Model):
    """A request's key, reserved by its user before the request runs, with the answer it got.

    The row is written in the same transaction as the request's own writes, so other
    transactions only ever see it with its answer (`status` is empty only inside that one).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    # SHA-256 of the method, path and body: a retry must be the same request.
    fingerprint = models.CharField(max_length=64)
    status = models.PositiveSmallIntegerField(null=True)
    content_type = models.CharField(max_length=255, blank=True)
    location = models.TextField(blank=True)
    body = models.BinaryField(default=b"")
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_once_per_user")
        ]

    def __str__(self) -> str:
        return self.key
