"""Why a job waits, in the reader's language.

The scheduler is pure and stores its English rendering in `Job.pending_message`; pages render
the reason again from `pending_code` and `pending_figures` with these templates, which take the
same figures as the scheduler's own (a test holds them together).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from scheduler import ReasonCode

if TYPE_CHECKING:
    from jobs.models import Job

TEMPLATES: Mapping[ReasonCode, Promise] = {
    ReasonCode.QUOTA_EXHAUSTED: _("%(scope)s uses %(used)s of limit %(limit)s %(gpu_type)s"),
    ReasonCode.MEMBER_CAP: _("%(member)s holds %(used)s of cap %(cap)s GPUs in team %(team)s"),
    ReasonCode.NO_CAPACITY: _("%(requested)s %(gpu_type)s GPUs requested, %(free)s free"),
    ReasonCode.FRAGMENTED: _("%(free)s GPUs free but no node with %(gpus_per_node)s free"),
    ReasonCode.PRIORITY: _("%(jobs_ahead)s jobs ahead"),
    ReasonCode.GANG_WAIT: _(
        "%(nodes_available)s of %(nodes)s nodes with %(gpus_per_node)s free GPUs; "
        "a gang starts whole"
    ),
    ReasonCode.ALL_NODES_CORDONED: _("all %(nodes)s %(gpu_type)s nodes are cordoned or not ready"),
    ReasonCode.BACKFILL_BLOCKED: _(
        "would delay job %(blocked_job)s, reserved to start in %(wait_s)s s"
    ),
    ReasonCode.PREEMPTING: _("waiting for %(victims)s preempted jobs to stop within %(wait_s)s s"),
    ReasonCode.NEVER_FITS: _(
        "can never start as things are: %(field)s %(requested)s requested, "
        "%(limit_by)s allows %(limit)s"
    ),
    ReasonCode.YIELDING: _("preempted for job %(for_job)s, which starts first"),
    ReasonCode.BUDGET_EXHAUSTED: _(
        "team budget used up: %(spent)s of %(budget)s %(currency)s spent this month"
    ),
}
LABELS: Mapping[ReasonCode, Promise] = {
    ReasonCode.QUOTA_EXHAUSTED: pgettext_lazy("pending reason", "Quota used up"),
    ReasonCode.MEMBER_CAP: pgettext_lazy("pending reason", "Member cap reached"),
    ReasonCode.NO_CAPACITY: pgettext_lazy("pending reason", "No free GPUs"),
    ReasonCode.FRAGMENTED: pgettext_lazy("pending reason", "Free GPUs scattered"),
    ReasonCode.PRIORITY: pgettext_lazy("pending reason", "Jobs ahead"),
    ReasonCode.GANG_WAIT: pgettext_lazy("pending reason", "Waiting for all nodes"),
    ReasonCode.ALL_NODES_CORDONED: pgettext_lazy("pending reason", "Nodes cordoned"),
    ReasonCode.BACKFILL_BLOCKED: pgettext_lazy("pending reason", "Held for a larger job"),
    ReasonCode.PREEMPTING: pgettext_lazy("pending reason", "Preempting"),
    ReasonCode.NEVER_FITS: pgettext_lazy("pending reason", "Never fits"),
    ReasonCode.YIELDING: pgettext_lazy("pending reason", "Yielding to its preemptor"),
    ReasonCode.BUDGET_EXHAUSTED: pgettext_lazy("pending reason", "Budget used up"),
}
"""A few words for each code, where a page shows the code itself (its reason follows)."""
# The figures that are words, not names or numbers: whose quota is used up, which setting a job
# can never fit (`scheduler.fits.LIMITS`).
WORDS: Mapping[str, Mapping[str, Promise]] = {
    "scope": {
        "team": pgettext_lazy("quota scope", "team"),
        "department": pgettext_lazy("quota scope", "department"),
    },
    "limit_by": {
        "team quota": pgettext_lazy("limit", "team quota"),
        "department quota": pgettext_lazy("limit", "department quota"),
        "member cap": pgettext_lazy("limit", "member cap"),
        "node count": pgettext_lazy("limit", "node count"),
        "node size": pgettext_lazy("limit", "node size"),
        "GPU type": pgettext_lazy("limit", "GPU type"),
    },
}


def reason_text(code: str, figures: Mapping[str, object], english: str) -> str:
    """The reason of `code` with its figures in the active language; `english` (the scheduler's
    rendering) where the code or its figures are not known here."""
    # A StrEnum member equals, and hashes as, its value: the stored code finds it.
    template = TEMPLATES.get(code)  # type: ignore[call-overload]
    if template is None:
        return english
    values = dict(figures)
    for figure, words in WORDS.items():
        if str(values.get(figure)) in words:
            values[figure] = str(words[str(values[figure])])
    try:
        return str(template) % values
    except (KeyError, TypeError, ValueError):
        return english


def reason_label(code: str) -> str:
    """The few words for `code` in the active language; the code itself where unknown here."""
    label = LABELS.get(code)  # type: ignore[call-overload]
    return code if label is None else str(label)


def pending_reason(job: Job) -> str:
    """Why `job` waits, as its pages show it; empty for a job that does not wait."""
    if not job.pending_code:
        return ""
    return reason_text(job.pending_code, job.pending_figures or {}, job.pending_message)
