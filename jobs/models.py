"""Job and JobEvent. A job's state only changes through `jobs.states.transition`."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import pgettext_lazy

from tenants.scoping import TenantOwned


class State(models.TextChoices):
    # The codes are the API's and the streams' machine-readable values; people read the labels
    # (`get_state_display`, `jobs.streams.localised`). The English labels are those the
    # migrations hold.
    QUEUED = "QUEUED", pgettext_lazy("job state", "Queued")
    ADMITTED = "ADMITTED", pgettext_lazy("job state", "Admitted")
    RUNNING = "RUNNING", pgettext_lazy("job state", "Running")
    SUCCEEDED = "SUCCEEDED", pgettext_lazy("job state", "Succeeded")
    FAILED = "FAILED", pgettext_lazy("job state", "Failed")
    CANCELLED = "CANCELLED", pgettext_lazy("job state", "Cancelled")
    PREEMPTED = "PREEMPTED", pgettext_lazy("job state", "Preempted")
    NODE_FAILED = "NODE_FAILED", pgettext_lazy("job state", "Node Failed")


TERMINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})
ACTIVE_STATES = frozenset(set(State) - TERMINAL_STATES)
HOLDING_STATES = frozenset({State.ADMITTED, State.RUNNING})
"""States in which a job holds GPUs (its placement counts against nodes and quota)."""
EXPLANATION_FIELDS = (
    "pending_code",
    "pending_message",
    "pending_figures",
    "estimated_start",
    "estimated_start_latest",
)
"""Why a QUEUED job waits and when it should start: the scheduler's word, cleared on leaving."""
SPEC_BODIES = ("command", "args", "env")
"""The spec's fields of unbounded size (up to MAX_SPEC_BYTES): shown only on the job's own page."""


class Sweep(TenantOwned):
    """A set of jobs submitted as one from a spec with `sweep:` (array or parameter grid)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=40)
    spec = models.JSONField(help_text="The spec as submitted, `sweep:` included (for clones).")
    param_names = models.JSONField(
        default=list, blank=True, help_text="The grid's parameters in the order given."
    )
    size = models.PositiveIntegerField()
    max_parallel = models.PositiveIntegerField(null=True, blank=True)
    cloned_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} (sweep #{self.pk}, {self.size} jobs)"


class Job(TenantOwned):
    """A GPU job: its spec as submitted, where it stands, and why it waits."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # No index of their own for these two (nor for the jobs a job was preempted for or cloned
    # from, which have partial ones below): every job's state changes rewrite its row's entry
    # in each index, four times in its life, and nothing reads jobs by queue or GPU type alone
    # but the rare deletion of one.
    queue = models.ForeignKey(
        "quotas.Queue", on_delete=models.PROTECT, related_name="jobs", db_index=False
    )
    gpu_type = models.ForeignKey(
        "quotas.GpuType", on_delete=models.PROTECT, related_name="jobs", db_index=False
    )
    name = models.CharField(max_length=40)
    image = models.CharField(max_length=255)
    command = models.JSONField(default=list)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    gpus_per_node = models.PositiveIntegerField()
    nodes = models.PositiveIntegerField(default=1)
    cpu = models.DecimalField(max_digits=7, decimal_places=3)
    memory = models.CharField(max_length=32)
    max_runtime = models.PositiveIntegerField(help_text="Seconds.")

    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED)
    state_reason = models.CharField(max_length=255, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    exit_code = models.IntegerField(null=True, blank=True)
    placement = models.JSONField(default=dict, blank=True)
    pending_code = models.CharField(max_length=32, blank=True)
    pending_message = models.CharField(max_length=255, blank=True)
    pending_figures = models.JSONField(default=dict, blank=True)
    estimated_start = models.DateTimeField(null=True, blank=True)
    estimated_start_latest = models.DateTimeField(null=True, blank=True)
    k8s_name = models.CharField(
        max_length=63, blank=True, help_text="Name of the batch/v1 Job while one exists."
    )
    grace_until = models.DateTimeField(
        null=True, blank=True, help_text="Set when preempted: the job is stopped at this time."
    )
    preempted_for = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    cloned_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    sweep = models.ForeignKey(
        Sweep, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs", db_index=False
    )
    sweep_index = models.PositiveIntegerField(null=True, blank=True)

    submitted_at = models.DateTimeField(auto_now_add=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["team", "state"]),
            models.Index(fields=["state", "submitted_at"]),
            # Only the few rows that have one: deleting jobs finds what refers to them here.
            models.Index(
                fields=["preempted_for"],
                name="jobs_job_preempted_for_set",
                condition=models.Q(preempted_for__isnull=False),
            ),
            models.Index(
                fields=["cloned_from"],
                name="jobs_job_cloned_from_set",
                condition=models.Q(cloned_from__isnull=False),
            ),
            # The controller's view of the queue (`cluster.snapshot.QueuedRequests`) counts and
            # reads queued ids every cycle: from this index alone, without the rows.
            models.Index(
                fields=["id"], name="jobs_job_queued", condition=models.Q(state=State.QUEUED)
            ),
            # Sweep members only: a sweep's page reads its members in order, and the controller
            # reads the active members of sweeps with `max_parallel` every cycle (by state).
            models.Index(
                fields=["sweep", "sweep_index"],
                name="jobs_job_sweep_member",
                condition=models.Q(sweep__isnull=False),
            ),
            models.Index(
                fields=["state", "sweep"],
                name="jobs_job_sweep_state",
                condition=models.Q(sweep__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk}, {self.state})"

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES


class JobEvent(TenantOwned):
    """One state transition of a job, with the reason it happened."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=12, choices=State.choices, blank=True)
    to_state = models.CharField(max_length=12, choices=State.choices)
    reason = models.CharField(max_length=255)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_state or '-'} → {self.to_state}"
