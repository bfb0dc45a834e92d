"""Node and Gpu inventory synced from Kubernetes, job log chunks, the controller's lease, the
admin's scheduling policy, and quota what-if runs.

Nodes are platform-wide (not tenant-owned): which team uses a GPU is known from job placements.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy

from tenants.scoping import TenantOwned


class Node(models.Model):
    """A Kubernetes node with GPUs, as the API reports it."""

    name = models.CharField(max_length=253, unique=True)
    gpu_type = models.ForeignKey(
        "quotas.GpuType", null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes"
    )
    product_label = models.CharField(max_length=100, blank=True)
    gpu_capacity = models.PositiveIntegerField(default=0)
    gpu_allocatable = models.PositiveIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True)
    rack = models.CharField(max_length=100, blank=True)
    nvlink_domain = models.CharField(max_length=100, blank=True)
    ready = models.BooleanField(default=False)
    cordoned = models.BooleanField(default=False)
    cordon_reason = models.CharField(max_length=255, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    agent_token_hash = models.CharField(max_length=64, blank=True)
    driver_version = models.CharField(
        max_length=80, blank=True, help_text="The NVIDIA driver its agent last reported."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.cordoned


class Gpu(models.Model):
    """One GPU of a node, by its index on the node; health follows faults the agent reports."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=64, blank=True)
    healthy = models.BooleanField(default=True)
    last_xid = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["node__name", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="one_gpu_index")]

    def __str__(self) -> str:
        return f"{self.node.name}/gpu{self.index}"


class JobLogChunk(TenantOwned):
    """A piece of a job's log, persisted by the controller's follower so logs outlive pods."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="log_chunks")
    pod = models.CharField(max_length=253)
    seq = models.PositiveIntegerField()
    text = models.TextField()
    first_line = models.PositiveIntegerField(help_text="Line number of the chunk's first line.")
    line_count = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["job_id", "pod", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["job", "pod", "seq"], name="one_chunk_per_seq")
        ]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.pod}#{self.seq}"


class Lease(models.Model):
    """The controller's leader lease: whoever holds an unexpired lease acts; others stand by."""

    name = models.CharField(max_length=64, unique=True)
    holder = models.CharField(max_length=128)
    expires_at = models.DateTimeField()
    acquired_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder} until {self.expires_at}"


class SchedulingPolicy(models.Model):
    """The scheduling policy an admin chose in the portal (one row, `pk=1`): the controller
    reads it every cycle, so a change takes effect at the next one. Without the row the
    controller runs its own (`--policy`, default the `SCHEDULER_POLICY` setting)."""

    policy = models.CharField(max_length=16)
    changed_at = models.DateTimeField()
    changed_by = models.CharField(max_length=150)

    def __str__(self) -> str:
        return f"{self.policy} since {self.changed_at} by {self.changed_by}"


class WhatIfState(models.TextChoices):
    QUEUED = "queued", gettext_lazy("Queued")
    RUNNING = "running", gettext_lazy("Running")
    DONE = "done", gettext_lazy("Done")
    FAILED = "failed", gettext_lazy("Failed")


class WhatIf(models.Model):
    """A quota or capacity what-if: a window of real submissions replayed through the scheduler
    as things are and with the asked changes (`cluster.whatif`), its progress and its figures.
    Seen by whoever asked and by platform admins only."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    requested_at = models.DateTimeField()
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    policy = models.CharField(max_length=16, help_text="The scheduling policy replayed.")
    changes = models.JSONField(
        default=dict,
        help_text='{"quotas": [{team, gpu_type, guaranteed, limit}], "gpus": {gpu_type: delta}}',
    )
    state = models.CharField(max_length=8, choices=WhatIfState.choices, default=WhatIfState.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent, 0-100.")
    results = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]

    def __str__(self) -> str:
        return f"what-if {self.pk} by {self.requested_by_id} ({self.state})"
