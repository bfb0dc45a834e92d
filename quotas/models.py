"""GpuType, Quota, MemberCap and Queue."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from tenants.models import SLUG_VALIDATOR
from tenants.scoping import TenantOwned


class GpuType(models.Model):
    """A resource flavour, matched to nodes by their `nvidia.com/gpu.product` label."""

    name = models.CharField(max_length=32, unique=True, validators=[SLUG_VALIDATOR])
    product_label = models.CharField(max_length=100, unique=True)
    memory_gb = models.PositiveIntegerField()
    gpus_per_node = models.PositiveIntegerField(
        default=8, validators=[MinValueValidator(1)], help_text="GPUs one node of this type holds."
    )
    price_per_gpu_hour = models.DecimalField(
        max_digits=10, decimal_places=4, default=Decimal("0"), validators=[MinValueValidator(0)]
    )
    # Kept by the inventory sync (cluster/inventory.py), so a job no node could hold is refused
    # at submission instead of waiting forever; empty until a node of the type has been seen.
    node_cpu_millis = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The most CPU (millicores) one node of this type offers."
    )
    node_memory_bytes = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The most memory (bytes) one node of this type offers."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Quota(TenantOwned):
    """`guaranteed` GPUs of a type are the team's own; up to `limit` it may borrow idle ones."""

    gpu_type = models.ForeignKey(GpuType, on_delete=models.PROTECT, related_name="quotas")
    guaranteed = models.PositiveIntegerField(default=0)
    limit = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["team__slug", "gpu_type__name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "gpu_type"], name="one_quota_per_team_type"),
            models.CheckConstraint(
                condition=models.Q(guaranteed__lte=models.F("limit")),
                name="quota_guaranteed_within_limit",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.gpu_type} {self.guaranteed}/{self.limit}"


class MemberCap(TenantOwned):
    """The most GPUs one member may hold at once in a team, across GPU types."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="gpu_caps"
    )
    max_gpus = models.PositiveIntegerField()

    class Meta:
        ordering = ["team__slug", "user__username"]
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_cap_per_member")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}: {self.max_gpus} GPUs"


class Queue(TenantOwned):
    """A team's priority queue: higher priority is served first and may preempt preemptible ones."""

    name = models.CharField(max_length=32, validators=[SLUG_VALIDATOR])
    priority = models.IntegerField(default=100)
    preemptible = models.BooleanField(default=False)
    max_runtime = models.PositiveIntegerField(
        default=24 * 3600, validators=[MinValueValidator(60)], help_text="Seconds."
    )

    class Meta:
        ordering = ["team__slug", "-priority", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="one_queue_name")]

    def __str__(self) -> str:
        return f"{self.team}/{self.name}"
