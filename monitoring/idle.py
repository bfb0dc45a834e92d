"""`check_idle`: one round of the controller's idle-job duty, on its clock's `now`.

A running job is idle when, over its team's window (`IdleRule.minutes`) of completed minutes,
every GPU-minute of it stayed under the threshold, every one of its GPUs reported, and the
reports cover the window at both ends; the window never reaches into its first
`first_minutes` (loading data, compiling). A job without samples is not idle: it is unknown.

An idle spell is warned once: the owner's notification (keyed `idle.job.<id>.<minute>`) is the
record of it, and the spell goes on while no GPU-minute of the job has reached the threshold
since that warning's window. Where the team's policy says stop, a spell still on
`stop_grace_minutes` after its warning ends the job: cancelled with the reason in its
`state_reason`, audited as `job.idle_stop`, the owner told; the controller then stops its pods
as for any cancelled job.

A round reads the running jobs, their rules, one aggregate of the roll-ups over the windows and
the warnings already given; it writes in the leader's fenced transaction (`writing`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import reduce
from operator import or_

from django.db.models import Count, F, Max, Min, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.record import audit_event
from cluster.locked import LockedJobs
from jobs.models import Job, State
from jobs.states import transition
from monitoring.gpu_use import busy
from monitoring.idle_policy import IdleRule, idle_rules
from monitoring.models import GpuMinute, IdleAction
from notifications.models import Notification
from notifications.send import notify

Writing = Callable[[], AbstractContextManager[LockedJobs]]
KEY_PREFIX = "idle.job."
COVERAGE_SLACK_S = 120
"""Reports may miss this long at either end of the window (a late batch, an agent restart)
and the window still counts as seen."""


@dataclass(frozen=True)
class Running:
    id: int
    team_id: int
    owner_id: int
    started_at: datetime
    gpus: int


@dataclass(frozen=True)
class Spell:
    job: Running
    rule: IdleRule
    warned_at: datetime | None
    """The warning of this spell, if it was given (None: a new spell)."""


@dataclass
class IdleRound:
    """What a round did: the jobs it warned and those it stopped."""

    warned: list[int] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)


def check_idle(*, writing: Writing, now: datetime | None = None) -> IdleRound:
    now = now or timezone.now()
    minute = int(now.timestamp()) // 60 * 60  # the window ends with the last completed minute
    jobs = _running()
    rules = idle_rules({job.team_id for job in jobs.values()})
    windows = {
        job.id: start
        for job in jobs.values()
        if (start := minute - rules[job.team_id].minutes * 60)
        >= job.started_at.timestamp() + rules[job.team_id].first_minutes * 60
    }
    idle = _idle(jobs, rules, windows, minute)
    spells = _spells(idle, rules, windows)
    new = [spell for spell in spells if spell.warned_at is None]
    due = [spell for spell in spells if _due(spell, now)]
    done = IdleRound()
    if not new and not due:
        return done
    with writing() as locked:
        for spell in new:
            _warn(spell, minute, now)
            done.warned.append(spell.job.id)
        done.stopped = [spell.job.id for spell in due if _stop(locked, spell)]
    return done


def _running() -> dict[int, Running]:
    rows = Job.unscoped.filter(state=State.RUNNING, started_at__isnull=False).values_list(
        "id", "team_id", "owner_id", "started_at", "nodes", "gpus_per_node"
    )
    return {
        job_id: Running(job_id, team_id, owner_id, started, nodes * per_node)
        for job_id, team_id, owner_id, started, nodes, per_node in rows
        if started is not None  # filtered above: this tells the type checker
    }


def _idle(
    jobs: dict[int, Running], rules: dict[int, IdleRule], windows: dict[int, int], minute: int
) -> list[Running]:
    """The jobs in `windows` whose GPUs all stayed under their rule over [start, minute)."""
    if not windows:
        return []
    by_start: dict[int, list[int]] = {}
    for job_id, start in windows.items():
        by_start.setdefault(start, []).append(job_id)
    spans = reduce(or_, (Q(job_id__in=ids, minute__gte=s) for s, ids in by_start.items()))
    rows = (
        GpuMinute.objects.filter(spans, minute__lt=minute, samples__gt=0)
        .values("job_id")
        .order_by()
        .annotate(
            gpus=Count("gpu_id", distinct=True),
            first=Min("minute"),
            last=Max("minute"),
            peak=Max(F("util_sum") / F("samples")),
        )
        .values_list("job_id", "gpus", "first", "last", "peak")
    )
    found = []
    for job_id, gpus, first, last, peak in rows:
        job, start = jobs[job_id], windows[job_id]
        if (
            gpus >= job.gpus
            and peak < rules[job.team_id].util_pct
            and first <= start + COVERAGE_SLACK_S
            and last >= minute - 60 - COVERAGE_SLACK_S
        ):
            found.append(job)
    return found


def _spells(
    idle: list[Running], rules: dict[int, IdleRule], windows: dict[int, int]
) -> list[Spell]:
    """Each idle job's spell, with its warning when this spell was warned already."""
    warned = _last_warnings(idle)
    # A warning before this window stands for this spell only if no minute in between was busy.
    gaps = [
        Q(job_id=job.id, minute__gte=_minute(warned[job.id]), minute__lt=windows[job.id])
        & busy(rules[job.team_id].util_pct)
        for job in idle
        if job.id in warned and warned[job.id].timestamp() < windows[job.id]
    ]
    ended: set[int] = set()
    if gaps:
        spans = GpuMinute.objects.filter(reduce(or_, gaps))
        ended = set(spans.values_list("job_id", flat=True).distinct())
    return [
        Spell(job, rules[job.team_id], None if job.id in ended else warned.get(job.id))
        for job in idle
    ]


def _last_warnings(jobs: Iterable[Running]) -> dict[int, datetime]:
    """{job id: its owner's latest idle warning of this run}."""
    wanted = {job.id: job for job in jobs}
    if not wanted:
        return {}
    since = min(job.started_at for job in wanted.values())
    rows = Notification.objects.filter(
        user_id__in={job.owner_id for job in wanted.values()},
        dedupe_key__startswith=KEY_PREFIX,
        created__gte=since,
    ).values_list("dedupe_key", "created")
    last: dict[int, datetime] = {}
    for key, created in rows:
        job_id = int(key.removeprefix(KEY_PREFIX).split(".")[0])
        job = wanted.get(job_id)
        if job is not None and created >= job.started_at:
            last[job_id] = max(created, last.get(job_id, created))
    return last


def _minute(at: datetime) -> int:
    return int(at.timestamp()) // 60 * 60


def _due(spell: Spell, now: datetime) -> bool:
    grace = timedelta(minutes=spell.rule.stop_grace_minutes)
    return (
        spell.rule.action == IdleAction.STOP
        and spell.warned_at is not None
        and now >= spell.warned_at + grace
    )


def _warn(spell: Spell, minute: int, now: datetime) -> None:
    job = Job.unscoped.select_related("owner", "team").get(pk=spell.job.id)
    rule = spell.rule
    body = _("Its %(gpus)d GPUs stayed under %(pct)d %% for %(minutes)d minutes.") % {
        "gpus": spell.job.gpus,
        "pct": rule.util_pct,
        "minutes": rule.minutes,
    }
    if rule.action == IdleAction.STOP:
        at = (now + timedelta(minutes=rule.stop_grace_minutes)).astimezone(UTC)
        body += " " + _(
            "Your team's policy stops it at %(at)s UTC unless its GPUs get busy again."
        ) % {"at": at.strftime("%Y-%m-%d %H:%M")}
    notify(
        [job.owner],
        level="warning",
        title=_("Job %(name)s (#%(id)d) is idle") % {"name": job.name, "id": job.pk},
        body=body,
        link=f"/jobs/{job.pk}/",
        dedupe_key=f"{KEY_PREFIX}{job.pk}.{minute}",
        team=job.team,
    )


def _stop(locked: LockedJobs, spell: Spell) -> bool:
    """Cancel the job, if it still runs, with the policy's reason; audited; owner told."""
    job = locked.get(spell.job.id)
    if job is None or job.state != State.RUNNING:
        return False
    rule = spell.rule
    # Stored, like every move's reason, in the portal's own words (not the round's language).
    reason = (
        f"stopped as idle: its GPUs stayed under {rule.util_pct} % for {rule.minutes} minutes"
        f" and {rule.stop_grace_minutes} more after the warning (team policy)"
    )
    transition(job, State.CANCELLED, reason, moves=locked.moves)
    after = {"state": job.state, "reason": job.state_reason, "policy": rule.as_dict()}
    locked.moves.audit(
        audit_event(
            "job.idle_stop",
            actor=None,
            team=job.team,
            target=job,
            before={"state": State.RUNNING},
            after=after,
        )
    )
    notify(
        [job.owner],
        level="warning",
        title=_("Job %(name)s (#%(id)d) was stopped as idle") % {"name": job.name, "id": job.pk},
        body=job.state_reason,
        link=f"/jobs/{job.pk}/",
        team=job.team,
    )
    return True
