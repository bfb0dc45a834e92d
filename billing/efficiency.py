"""GPU efficiency over a period, by job, user or team: GPU-hours allocated (the usage segments)
against GPU-hours used (allocated × the job's average utilisation in the minute roll-ups),
the wasted rest and what it cost (the price book, as billed), and the GPUs' energy.

A job without samples in the period is unmeasured: its hours count as allocated and
unmeasured, never as used or wasted (allocated = used + wasted + unmeasured). Who sees what is
the usage report's rule (`billing.usage.visible_segments`): an admin every team, a lead the
whole team, a member their own jobs. A report costs the same few queries whatever the number
of jobs: the segments folded by job, the jobs, their roll-ups grouped by job and GPU, the
teams' idle thresholds and the price book.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from billing.prices import PriceBook
from billing.usage import ZERO, Figures, Period, fixed, fold, visible_segments
from jobs.models import Job
from monitoring.gpu_use import JobUse, job_use, right_sizing_hint
from monitoring.idle_policy import idle_rules

if TYPE_CHECKING:
    from tenants.models import Team
    from tenants.scoping import AnyUser

EFFICIENCY_GROUPS = ("job", "user", "team")
JOULES_PER_KWH = 3_600_000
HUNDRED = Decimal(100)


@dataclass
class Efficiency:
    """GPU-seconds allocated, measured (with samples) and used, the cost of the wasted ones,
    and the GPUs' energy."""

    allocated: Decimal = ZERO
    measured: Decimal = ZERO
    used: Decimal = ZERO
    wasted_cost: Decimal = ZERO
    energy_joules: float = 0.0

    def add(self, other: Efficiency) -> None:
        self.allocated += other.allocated
        self.measured += other.measured
        self.used += other.used
        self.wasted_cost += other.wasted_cost
        self.energy_joules += other.energy_joules

    @property
    def wasted(self) -> Decimal:
        return self.measured - self.used

    def as_dict(self) -> dict[str, Any]:
        utilisation = self.used / self.measured * HUNDRED if self.measured else None
        return {
            "allocated_gpu_hours": fixed(self.allocated / 3600, 4),
            "used_gpu_hours": fixed(self.used / 3600, 4),
            "wasted_gpu_hours": fixed(self.wasted / 3600, 4),
            "unmeasured_gpu_hours": fixed((self.allocated - self.measured) / 3600, 4),
            "utilisation_pct": None if utilisation is None else fixed(utilisation, 1),
            "wasted_cost": fixed(self.wasted_cost, 2),
            "energy_joules": round(self.energy_joules, 1),
            "energy_kwh": round(self.energy_joules / JOULES_PER_KWH, 3),
        }


def job_efficiency(usage: Figures, use: JobUse | None) -> Efficiency:
    """A job's figures from its usage in the period (billed and credited) and its roll-ups."""
    allocated = usage.gpu_seconds + usage.credited_gpu_seconds
    if use is None or not use.measured:
        return Efficiency(allocated=allocated)
    busy = Decimal(use.util_average) / HUNDRED
    return Efficiency(
        allocated=allocated,
        measured=allocated,
        used=allocated * busy,
        wasted_cost=usage.cost * (1 - busy),  # credited time is not billed: its waste costs none
        energy_joules=use.energy_joules,
    )


@dataclass
class EfficiencyReport:
    period: Period
    group_by: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    total: Efficiency = field(default_factory=Efficiency)


def efficiency_report(
    user: AnyUser,
    period: Period,
    group_by: str,
    *,
    team: Team | None = None,
    now: datetime | None = None,
) -> EfficiencyReport:
    """`user`'s view of the efficiency in `period`, by `group_by` (one of EFFICIENCY_GROUPS),
    of `team` alone when given (one the caller has checked `user` may see)."""
    now = now or timezone.now()
    segments = visible_segments(user)
    if team is not None:
        segments = segments.filter(team=team)
    usage, _teams = fold(segments, period, ("job",), PriceBook.load(), now)
    job_ids = [int(job_id) for (job_id,) in usage]
    jobs = {
        job["id"]: job
        for job in Job.unscoped.filter(pk__in=job_ids).values(
            "id", "name", "team_id", "team__slug", "owner__username", "nodes", "gpus_per_node"
        )
    }
    uses = job_use(job_ids, int(period.begins.timestamp()), int(period.ends.timestamp()))
    rules = idle_rules({job["team_id"] for job in jobs.values()})
    report = EfficiencyReport(period, group_by)
    groups: dict[str, Efficiency] = {}
    for job_id in sorted(job_ids):
        job = jobs[job_id]
        figures = job_efficiency(usage[(str(job_id),)], uses.get(job_id))
        report.total.add(figures)
        if group_by == "job":
            asked = job["nodes"] * job["gpus_per_node"]
            hint = right_sizing_hint(asked, uses.get(job_id), rules[job["team_id"]].util_pct)
            report.rows.append(_job_row(job, asked, hint, figures))
        else:
            label = job["owner__username"] if group_by == "user" else job["team__slug"]
            groups.setdefault(label, Efficiency()).add(figures)
    report.rows += [{group_by: label, **groups[label].as_dict()} for label in sorted(groups)]
    return report


def _job_row(job: Mapping[str, Any], asked: int, hint: str, figures: Efficiency) -> dict[str, Any]:
    return {
        "job": job["id"],
        "name": job["name"],
        "user": job["owner__username"],
        "team": job["team__slug"],
        "gpus": asked,
        "hint": hint,
        **figures.as_dict(),
    }
