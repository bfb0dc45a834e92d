"""AuditEvent rows and the chain head they hang from.

Rows keep plain ids for actor and team instead of foreign keys: deleting a user or a team must
never rewrite (or cascade into) history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from django.apps import apps
from django.db import models
from django.db.models.functions import Cast

from base.roles import Role

if TYPE_CHECKING:
    from tenants.scoping import AnyUser

GENESIS_HASH = "0" * 64


class AppendOnlyError(RuntimeError):
    """Audit rows are written once and never changed by the application."""


class AuditQuerySet(models.QuerySet["AuditEvent"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise AppendOnlyError("audit events are never updated")

    def delete(self) -> NoReturn:
        raise AppendOnlyError("audit events are never deleted")

    def for_user(self, user: AnyUser) -> AuditQuerySet:
        """Admins see everything; leads see their teams' events; a member, the events about
        their own jobs in the teams they belong to."""
        if not user.is_authenticated:
            return self.none()
        if user.is_staff:
            return self
        memberships = user.memberships  # tenants.Membership
        led = memberships.filter(role=Role.LEAD).values("team_id")
        # Looked up by name: audit sits below the apps whose events it keeps.
        job = apps.get_model("jobs", "Job")
        own_jobs = (
            job._meta.base_manager.filter(owner=user, team_id__in=memberships.values("team_id"))
            .annotate(key=Cast("pk", models.CharField()))
            .values("key")
        )
        return self.filter(
            models.Q(team_id__in=led)
            | models.Q(target_type=job._meta.label_lower, target_id__in=own_jobs)
        )


class AuditManager(models.Manager["AuditEvent"]):
    """Fails closed like the tenant managers: say whose trail you read."""

    def get_queryset(self) -> AuditQuerySet:
        raise AppendOnlyError("AuditEvent.objects needs a scope: use .for_user(user)")

    def for_user(self, user: AnyUser) -> AuditQuerySet:
        return AuditQuerySet(self.model, using=self._db).for_user(user)


class AuditEvent(models.Model):
    """One state-changing action: who, which team, what, before/after, from where, chained."""

    seq = models.PositiveBigIntegerField(unique=True)
    at = models.DateTimeField(db_index=True)
    actor_id = models.BigIntegerField(null=True, blank=True)
    actor_name = models.CharField(max_length=150, blank=True)
    team_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    team_slug = models.CharField(max_length=32, blank=True)
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    ip = models.CharField(max_length=45, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    # The verifier and the writer read the raw table; everything else goes through a scope.
    chain = AuditQuerySet.as_manager()
    objects = AuditManager()

    class Meta:
        ordering = ["-seq"]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} by {self.actor_name or 'system'}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:  # read from the database, or written already
            raise AppendOnlyError("audit events are never updated")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnlyError("audit events are never deleted")


class AuditHead(models.Model):
    """The single row holding the last sequence number and hash; its row lock orders writers."""

    seq = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64, default=GENESIS_HASH)

    def __str__(self) -> str:
        return f"head #{self.seq}"
