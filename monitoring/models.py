"""GPU metrics the agents post: per-minute roll-ups, per-job aggregates, and Xid events."""

from __future__ import annotations

from django.db import models

from tenants.scoping import TenantOwned


class GpuMinute(models.Model):
    """One GPU's samples of one minute, summed so averages and peaks can be read back."""

    gpu = models.ForeignKey("cluster.Gpu", on_delete=models.CASCADE, related_name="minutes")
    minute = models.PositiveBigIntegerField(help_text="Unix time of the minute's start.")
    # The job the GPU served in this minute (by placement); null when idle.
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    samples = models.PositiveIntegerField(default=0)
    util_sum = models.FloatField(default=0)
    util_max = models.FloatField(null=True)
    fb_used_max = models.FloatField(null=True, help_text="MiB.")
    temp_max = models.FloatField(null=True)
    power_sum = models.FloatField(default=0, help_text="W, summed over samples.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["gpu", "minute"], name="one_rollup_per_gpu_minute")
        ]
        indexes = [models.Index(fields=["minute"]), models.Index(fields=["job", "minute"])]

    def __str__(self) -> str:
        return f"{self.gpu_id}@{self.minute}"


class JobMetrics(TenantOwned):
    """What a job's GPUs did over its whole life; kept for good (billing and efficiency)."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="metrics")
    samples = models.PositiveBigIntegerField(default=0)
    util_sum = models.FloatField(default=0)
    util_peak = models.FloatField(default=0)
    fb_used_peak = models.FloatField(default=0, help_text="MiB.")
    energy_joules = models.FloatField(default=0)
    gpu_seconds = models.FloatField(default=0)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"metrics of job {self.job_id}"

    @property
    def util_average(self) -> float:
        return self.util_sum / self.samples if self.samples else 0.0

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600


class XidEvent(models.Model):
    """An Xid error a GPU reported; fatal codes mark the GPU unhealthy."""

    node = models.ForeignKey("cluster.Node", on_delete=models.CASCADE, related_name="xid_events")
    gpu = models.ForeignKey("cluster.Gpu", on_delete=models.CASCADE, related_name="xid_events")
    xid = models.PositiveIntegerField()
    fatal = models.BooleanField()
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["node", "at"])]

    def __str__(self) -> str:
        return f"Xid {self.xid} on {self.gpu_id} at {self.at:%Y-%m-%d %H:%M:%S}"


class AgentCursor(models.Model):
    """The last batch stored of one start of a node's agent: a batch numbered no higher is a
    resend of one already counted."""

    node = models.ForeignKey("cluster.Node", on_delete=models.CASCADE, related_name="+")
    boot = models.CharField(max_length=64)
    seq = models.PositiveBigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["node", "boot"], name="one_cursor_per_agent_start")
        ]

    def __str__(self) -> str:
        return f"{self.node_id}/{self.boot}: {self.seq}"
