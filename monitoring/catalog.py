"""What to do about a GPU fault: each Xid by NVIDIA's Xid catalogue (its "resolution bucket"),
and the ECC and row-remap counters, classified into one action of the fault loop."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Action(models.TextChoices):
    NONE = "none", _("none")
    RESTART_JOB = "restart_job", _("restart the job")
    RESET_GPU = "reset_gpu", _("drain and reset the GPU")
    REBOOT = "reboot", _("drain and reboot the node")
    REPLACE_GPU = "replace_gpu", _("replace the GPU")


SEVERITY = [Action.NONE, Action.RESTART_JOB, Action.RESET_GPU, Action.REBOOT, Action.REPLACE_GPU]

XIDS: dict[int, tuple[Action, str]] = {
    13: (Action.RESTART_JOB, "Graphics engine exception (usually the application's fault)"),
    31: (Action.RESTART_JOB, "GPU memory page fault (usually the application's fault)"),
    43: (Action.RESTART_JOB, "GPU stopped processing: the application's channel was reset"),
    45: (Action.NONE, "Preemptive cleanup after earlier errors"),
    48: (Action.RESET_GPU, "Double-bit ECC error"),
    61: (Action.RESET_GPU, "Internal micro-controller breakpoint or warning"),
    62: (Action.RESET_GPU, "Internal micro-controller halt"),
    63: (Action.RESET_GPU, "ECC page retirement or row remap recorded: takes effect at reset"),
    64: (Action.RESET_GPU, "ECC page retirement or row remap recording failed"),
    68: (Action.RESTART_JOB, "Video decoder (NVDEC) exception"),
    69: (Action.RESTART_JOB, "Graphics engine class error"),
    74: (Action.RESET_GPU, "NVLink error"),
    79: (Action.REBOOT, "GPU has fallen off the bus"),
    92: (Action.NONE, "High single-bit ECC error rate (watch it)"),
    94: (Action.RESTART_JOB, "Contained ECC error: only the application using it is affected"),
    95: (Action.RESET_GPU, "Uncontained ECC error: every application on the GPU is affected"),
    119: (Action.RESET_GPU, "GSP RPC timeout"),
    120: (Action.RESET_GPU, "GSP error"),
    154: (Action.REBOOT, "GPU recovery action changed: the driver asks for a reset or reboot"),
}

GPU_OUT = frozenset({Action.RESET_GPU, Action.REBOOT, Action.REPLACE_GPU})
"""Actions after which the GPU leaves service (marked unhealthy) until an admin returns it."""
CORDONS = frozenset({Action.REBOOT, Action.REPLACE_GPU})
"""Actions that need the whole node drained: cordoned, every job on it requeued. A GPU reset
needs only that GPU's jobs gone; its node keeps serving its other GPUs."""

ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
COUNTERS: dict[str, tuple[Action, str]] = {
    ECC_DBE: (Action.RESET_GPU, "Uncorrected (double-bit) ECC errors"),
    REMAP_PENDING: (Action.RESET_GPU, "A row remap is pending: it takes effect at reset"),
    REMAP_FAILURE: (Action.REPLACE_GPU, "Row remapping failed: no spare rows left"),
}


def classify_xid(xid: int) -> Action:
    """The action for an Xid; one the catalogue does not list calls for none."""
    return XIDS.get(xid, (Action.NONE, ""))[0]


def describe_xid(xid: int) -> str:
    return XIDS.get(xid, (Action.NONE, "Xid not in the catalogue"))[1]


def classify_counters(sample: dict[str, object]) -> Action:
    """The action the ECC and remap counters of a GPU's sample call for (the most severe)."""
    found = [action for field, (action, _) in COUNTERS.items() if _positive(sample.get(field))]
    return max(found, key=SEVERITY.index, default=Action.NONE)


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and value > 0
