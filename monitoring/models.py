"""GPU metrics the agents post: per-minute roll-ups, per-job aggregates, Xid events; alert
rules, silences and alerts; incidents of the fault loop."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

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
    action = models.CharField(
        max_length=16,
        default="none",
        help_text="What the catalogue says to do (monitoring.faults).",
    )
    handled_at = models.DateTimeField(
        null=True, blank=True, help_text="When the controller's fault loop acted on it."
    )

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["node", "at"]),
            models.Index(fields=["id"], condition=Q(handled_at=None), name="xid_unhandled"),
        ]

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


class Level(models.TextChoices):
    WARNING = "warning", _("warning")
    CRITICAL = "critical", _("critical")


class Scope(models.TextChoices):
    CLUSTER = "cluster", _("cluster")
    GPU_TYPE = "gpu_type", _("GPU type")
    NODE = "node", _("node")
    TEAM = "team", _("team")
    JOB = "job", _("job")


class AlertRule(models.Model):
    """A metric (a DCGM field of the GPUs' latest samples, or a portal figure), where it applies,
    and when it alerts: past a warning or critical threshold for `duration_s`."""

    name = models.CharField(max_length=100, unique=True)
    metric = models.CharField(max_length=100)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.CLUSTER)
    scope_value = models.CharField(
        max_length=100, blank=True, help_text="The GPU type, node, team slug or job id scoped to."
    )
    below = models.BooleanField(default=False, help_text="Alert when the value is at or below.")
    warning = models.FloatField(null=True, blank=True)
    critical = models.FloatField(null=True, blank=True)
    duration_s = models.PositiveIntegerField(default=0)
    repeat_s = models.PositiveIntegerField(default=3600)
    enabled = models.BooleanField(default=True)
    description = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Silence(models.Model):
    """No notifications, until `ends_at`, of a rule's alerts (or all rules'), of subjects that
    start with `subject` (all when empty)."""

    rule = models.ForeignKey(
        AlertRule, null=True, blank=True, on_delete=models.CASCADE, related_name="silences"
    )
    subject = models.CharField(max_length=200, blank=True)
    reason = models.CharField(max_length=255)
    ends_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-ends_at"]

    def __str__(self) -> str:
        return f"silence of {self.rule_id or 'all'} {self.subject} until {self.ends_at}"


class AlertState(models.TextChoices):
    PENDING = "pending", _("pending")
    FIRING = "firing", _("firing")
    ACKNOWLEDGED = "acknowledged", _("acknowledged")
    RESOLVED = "resolved", _("resolved")


LIVE_ALERT_STATES = (AlertState.PENDING, AlertState.FIRING, AlertState.ACKNOWLEDGED)


class Alert(models.Model):
    """One rule's condition on one subject (a GPU, node or job), from the moment it held until it
    cleared: one live alert per rule and subject."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    subject = models.CharField(max_length=200)
    level = models.CharField(max_length=10, choices=Level.choices)
    state = models.CharField(max_length=12, choices=AlertState.choices)
    value = models.FloatField()
    team = models.ForeignKey(
        "tenants.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    node = models.ForeignKey(
        "cluster.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(help_text="When the condition first held.")
    fired_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "subject"],
                condition=~Q(state="resolved"),
                name="one_live_alert_per_rule_subject",
            )
        ]
        indexes = [models.Index(fields=["state"]), models.Index(fields=["team", "state"])]

    def __str__(self) -> str:
        return f"{self.rule.name} on {self.subject} ({self.state})"


class IncidentState(models.TextChoices):
    OPEN = "open", _("open")
    RESOLVED = "resolved", _("resolved")


class Incident(models.Model):
    """A fault and what it took: its timeline, what it touched, and the admins' post-mortem."""

    title = models.CharField(max_length=200)
    state = models.CharField(
        max_length=10, choices=IncidentState.choices, default=IncidentState.OPEN
    )
    action = models.CharField(max_length=16)
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    nodes = models.JSONField(default=list, blank=True)
    gpus = models.JSONField(default=list, blank=True, help_text='["node/index", ...]')
    jobs = models.JSONField(default=list, blank=True, help_text="Ids of the jobs it moved.")
    teams = models.JSONField(default=list, blank=True, help_text="Slugs of their teams.")
    root_cause = models.TextField(blank=True)
    follow_ups = models.TextField(blank=True)

    class Meta:
        ordering = ["-opened_at", "-id"]

    def __str__(self) -> str:
        return self.title


class IncidentEvent(models.Model):
    """One line of an incident's timeline."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    kind = models.CharField(max_length=16)
    text = models.CharField(max_length=500)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.incident_id} {self.kind}: {self.text}"


# -- idle jobs (monitoring.idle) ----------------------------------------------------------------


class IdleAction(models.TextChoices):
    NOTIFY = "notify", _("notify the owner")
    STOP = "stop", _("notify, then stop after the grace period")


class IdlePolicy(TenantOwned):
    """A team's rule for idle jobs (`monitoring.idle`): a running job whose GPUs all stay under
    `util_pct` for `minutes` (never counting its first `first_minutes`) is idle; its owner is
    told, and with `stop` it is stopped `stop_grace_minutes` later if still idle. A team
    without one follows the IDLE_* settings."""

    util_pct = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="A GPU whose minute average stays under this (%) is idle.",
    )
    minutes = models.PositiveIntegerField(
        validators=[MinValueValidator(5), MaxValueValidator(1440)]
    )
    first_minutes = models.PositiveIntegerField(validators=[MaxValueValidator(1440)])
    action = models.CharField(max_length=8, choices=IdleAction.choices, default=IdleAction.NOTIFY)
    stop_grace_minutes = models.PositiveIntegerField(validators=[MaxValueValidator(1440)])
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team"], name="one_idle_policy_per_team")]

    def __str__(self) -> str:
        return f"{self.team_id}: under {self.util_pct} % for {self.minutes} min → {self.action}"


# -- health inspections (monitoring.inspections) ------------------------------------------------


class InspectionTrigger(models.TextChoices):
    SCHEDULE = "schedule", _("schedule")
    ADMIN = "admin", _("admin")


class CheckStatus(models.TextChoices):
    OK = "ok", pgettext_lazy("check status", "ok")
    WARN = "warn", pgettext_lazy("check status", "warning")
    FAIL = "fail", pgettext_lazy("check status", "failed")


class InspectionRun(models.Model):
    """One health inspection of every node over what the portal has stored of it: when, who
    asked (the schedule or an admin), how many nodes passed, and which it brought back."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    trigger = models.CharField(max_length=10, choices=InspectionTrigger.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    nodes_passed = models.PositiveIntegerField(default=0)
    nodes_failed = models.PositiveIntegerField(default=0)
    uncordoned = models.JSONField(
        default=list, blank=True, help_text="Nodes the fault loop cordoned that this run passed."
    )

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"inspection {self.pk} at {self.started_at:%Y-%m-%d %H:%M:%S}"


class InspectionResult(models.Model):
    """One check of one node in one inspection: its verdict, the figure it judged, and why."""

    run = models.ForeignKey(InspectionRun, on_delete=models.CASCADE, related_name="results")
    node = models.ForeignKey("cluster.Node", on_delete=models.CASCADE, related_name="+")
    check_name = models.CharField(max_length=32)
    status = models.CharField(max_length=4, choices=CheckStatus.choices)
    figure = models.FloatField(null=True, blank=True)
    detail = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["run_id", "node__name", "check_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "node", "check_name"], name="one_result_per_check"
            )
        ]
        indexes = [models.Index(fields=["run", "status"])]

    def __str__(self) -> str:
        return f"{self.run_id} {self.node_id} {self.check_name}: {self.status}"
