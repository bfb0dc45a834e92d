"""What each GPU of a job did, from the minute roll-ups: utilisation, energy, and how many of its
GPUs did real work (the right-sizing hint: "asked 8 GPUs, 2 were used above 5 %").

A GPU counts as used when its average utilisation over the span exceeds the team's idle
threshold (`IdleRule.util_pct`): the same line that makes a job idle makes a GPU unused.
Energy is each minute's average power times 60 s: the roll-ups keep power summed over the
minute's samples, not the seconds between them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from django.db.models import F, Q, Sum
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from monitoring.models import GpuMinute

SECONDS_PER_MINUTE = 60


@dataclass(frozen=True)
class GpuUse:
    """One GPU's roll-ups summed over a span."""

    samples: int
    util_sum: float
    energy_joules: float

    @property
    def util_average(self) -> float:
        return self.util_sum / self.samples if self.samples else 0.0


@dataclass
class JobUse:
    """A job's GPUs over a span; a job without samples has none (unknown, not idle)."""

    gpus: dict[int, GpuUse] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        return bool(self.gpus)

    @property
    def util_average(self) -> float:
        """Sample-weighted over all its GPUs, in %."""
        samples = sum(g.samples for g in self.gpus.values())
        return sum(g.util_sum for g in self.gpus.values()) / samples if samples else 0.0

    @property
    def energy_joules(self) -> float:
        return sum(g.energy_joules for g in self.gpus.values())

    def used_gpus(self, util_pct: float) -> int:
        """How many of its GPUs averaged above `util_pct` %."""
        return sum(1 for g in self.gpus.values() if g.util_average > util_pct)


def job_use(
    job_ids: Collection[int], since: int | None = None, until: int | None = None
) -> dict[int, JobUse]:
    """{job id: its GPUs' use} over minutes in [since, until) (Unix seconds; open ends when
    None), in one query grouped by job and GPU. Jobs without samples are left out."""
    minutes = GpuMinute.objects.filter(job_id__in=job_ids, samples__gt=0)
    if since is not None:
        minutes = minutes.filter(minute__gte=since)
    if until is not None:
        minutes = minutes.filter(minute__lt=until)
    rows = (
        minutes.values("job_id", "gpu_id")
        .order_by()
        .annotate(
            n=Sum("samples"),
            util=Sum("util_sum"),
            power=Sum(F("power_sum") / F("samples")),
        )
        .values_list("job_id", "gpu_id", "n", "util", "power")
    )
    found: dict[int, JobUse] = {}
    for job_id, gpu_id, samples, util, power in rows:
        use = GpuUse(samples, util or 0.0, (power or 0.0) * SECONDS_PER_MINUTE)
        found.setdefault(job_id, JobUse()).gpus[gpu_id] = use
    return found


def busy(util_pct: float) -> Q:
    """GPU-minutes whose average reached `util_pct` % (rows with samples only)."""
    return Q(samples__gt=0, util_sum__gte=F("samples") * util_pct)


def right_sizing_hint(asked: int, use: JobUse | None, util_pct: float) -> str:
    """ "asked 8 GPUs, 2 were used above 5 %" when fewer GPUs did work than the job asked
    for; "" when all did, or nothing is known."""
    if use is None or not use.measured:
        return ""
    used = use.used_gpus(util_pct)
    if used >= asked:
        return ""
    asked_text = ngettext("asked %(asked)d GPU", "asked %(asked)d GPUs", asked) % {"asked": asked}
    used_text = ngettext(
        "%(used)d was used above %(pct)s %%", "%(used)d were used above %(pct)s %%", used
    ) % {"used": used, "pct": f"{util_pct:g}"}
    return _("%(asked)s, %(used)s") % {"asked": asked_text, "used": used_text}
