"""UsageSegment (a job's hold on its GPUs, one per run) and its daily roll-up, the price book and
queue multipliers."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.models import State
from tenants.scoping import TenantOwned


class CreditReason(models.TextChoices):
    """Why a segment's time is not billed: the platform, not the job, ended it."""

    NODE_LOST = "node_lost", _("node lost")
    XID = "xid", _("GPU error (Xid)")
    PREEMPTED = "preempted", _("preempted or reclaimed")


class UsageSegment(TenantOwned):
    """One run of a job: from its admission to the release of its GPUs (open while it holds
    them). Written with the job's own moves (`billing.segments`), so each run counts once."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    queue = models.ForeignKey(
        "quotas.Queue", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    gpu_type = models.ForeignKey(
        "quotas.GpuType", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    gpus = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end_state = models.CharField(max_length=12, choices=State.choices, blank=True)
    end_reason = models.CharField(max_length=255, blank=True)
    gpu_seconds = models.DecimalField(
        max_digits=20, decimal_places=6, default=Decimal(0), help_text="Set when it ends."
    )
    credited = models.BooleanField(default=False)
    credit_reason = models.CharField(max_length=16, choices=CreditReason.choices, blank=True)

    class Meta:
        ordering = ["started_at", "id"]
        constraints = [
            # A job holds its GPUs once at a time: a second open segment would count twice.
            models.UniqueConstraint(
                fields=["job"],
                condition=models.Q(ended_at__isnull=True),
                name="one_open_segment_per_job",
            )
        ]
        indexes = [
            models.Index(fields=["team", "started_at"]),
            models.Index(fields=["started_at"]),
            # A month's reports read the segments that end after it begins: without this, each
            # report scans every segment ever written (`billing.usage`).
            models.Index(fields=["ended_at"], name="billing_segment_ended_at"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt}: {self.gpus} GPUs from {self.started_at}"


class UsageDay(TenantOwned):
    """The GPU time of the closed segments on one UTC day, by member, queue, GPU type and
    credit: what a report over whole days reads instead of the month's segments. Added to in
    the transaction that closes the segments (`billing.rollup.add_to_days`), so it is always
    their sum; open segments are summed live (`billing.usage`)."""

    day = models.DateField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    queue = models.ForeignKey(
        "quotas.Queue", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    gpu_type = models.ForeignKey(
        "quotas.GpuType", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    credited = models.BooleanField()
    # Whole GPU-microseconds: sums stay exact on every database (SQLite's decimals are floats).
    gpu_microseconds = models.BigIntegerField()

    class Meta:
        constraints = [
            # Its first column serves the reports' range of days.
            models.UniqueConstraint(
                fields=["day", "team", "user", "queue", "gpu_type", "credited"],
                name="one_usage_day_per_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} team {self.team_id} user {self.user_id}: {self.gpu_microseconds} µs"


class GpuPrice(models.Model):
    """The price of one GPU-hour of a type from a date (00:00 UTC) on, until the next entry.

    Before a type's first entry its `GpuType.price_per_gpu_hour` applies."""

    gpu_type = models.ForeignKey("quotas.GpuType", on_delete=models.PROTECT, related_name="prices")
    effective_from = models.DateField()
    price_per_gpu_hour = models.DecimalField(
        max_digits=10, decimal_places=4, validators=[MinValueValidator(0)]
    )

    class Meta:
        ordering = ["gpu_type__name", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_type", "effective_from"], name="one_price_per_type_and_day"
            )
        ]

    def __str__(self) -> str:
        return f"{self.gpu_type_id}: {self.price_per_gpu_hour} from {self.effective_from}"


class QueueMultiplier(TenantOwned):
    """What a queue's GPU-hours cost against the price book (a preemptible queue is cheaper);
    1 for a queue without one."""

    queue = models.OneToOneField("quotas.Queue", on_delete=models.CASCADE, related_name="+")
    multiplier = models.DecimalField(
        max_digits=6, decimal_places=3, validators=[MinValueValidator(0)]
    )

    def __str__(self) -> str:
        return f"{self.queue_id} × {self.multiplier}"


class Statement(TenantOwned):
    """A team's final statement of a month: written once, at the month's end, and never changed
    (a correction is an `Adjustment`). The current month's is a live draft, never stored."""

    month = models.DateField(help_text="The month's first day.")
    currency = models.CharField(max_length=3)
    gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6)
    cost = models.DecimalField(max_digits=20, decimal_places=2)
    credited_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6)
    credited_cost = models.DecimalField(max_digits=20, decimal_places=2)
    lines = models.JSONField(default=list, help_text="By member, GPU type and queue.")
    finalised_at = models.DateTimeField()

    class Meta:
        ordering = ["-month", "team__slug"]
        constraints = [
            models.UniqueConstraint(fields=["team", "month"], name="one_statement_per_month")
        ]

    def __str__(self) -> str:
        return f"{self.team_id} {self.month:%Y-%m}"


class Adjustment(TenantOwned):
    """A correction to a final statement by a platform admin, with its reason (audited)."""

    statement = models.ForeignKey(Statement, on_delete=models.PROTECT, related_name="adjustments")
    amount = models.DecimalField(
        max_digits=20, decimal_places=2, help_text="Added to the statement's cost (may be < 0)."
    )
    reason = models.CharField(max_length=255)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.statement_id}: {self.amount} ({self.reason})"


class Budget(TenantOwned):
    """A team's monthly budget in the portal's currency (`BILLING_CURRENCY`): its leads are
    told once per month at each threshold, and with `hard_stop` its new jobs wait once it is
    spent. Set by platform admins and the department's leads, audited."""

    amount = models.DecimalField(
        max_digits=14, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))]
    )
    warning_pct = models.PositiveSmallIntegerField(default=80)
    critical_pct = models.PositiveSmallIntegerField(default=100)
    hard_stop = models.BooleanField(
        default=False, help_text=_("Once the month's budget is spent, new jobs wait.")
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team__slug"]
        constraints = [models.UniqueConstraint(fields=["team"], name="one_budget_per_team")]

    def __str__(self) -> str:
        return f"{self.team_id}: {self.amount} a month"


class BudgetLevel(models.TextChoices):
    """A budget threshold; its notification goes out once per team and month."""

    WARNING = "warning", _("warning")
    CRITICAL = "critical", _("critical")


class BudgetAlert(TenantOwned):
    """That a team's leads were told it passed a threshold of its budget in a month: kept so a
    restarted controller, or a budget edited again, does not tell them twice."""

    month = models.DateField(help_text="The month's first day.")
    level = models.CharField(max_length=8, choices=BudgetLevel.choices)
    spent = models.DecimalField(max_digits=20, decimal_places=2)
    budget = models.DecimalField(max_digits=14, decimal_places=2)
    sent_at = models.DateTimeField()

    class Meta:
        ordering = ["month", "team__slug", "level"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "month", "level"], name="one_budget_alert_per_level_and_month"
            )
        ]

    def __str__(self) -> str:
        return f"{self.team_id} {self.month:%Y-%m} {self.level}"
