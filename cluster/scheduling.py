"""Scheduling cycles and stops: snapshot, decide, apply, then tell Kubernetes (DESIGN.md 5).

Invariants, each with its reason:
- A cycle runs when something changed (a report, a submission, a stop) and at the latest every
  `Timing.cycle_every_s`: some changes announce themselves to no one (a cancelled job deep in
  the queue, estimates moving with time).
- `SCHEDULING_SHARE`: after a cycle that took t, a change waits up to t × (1 / share − 1) for
  its cycle while watch reports wait, so the loop takes them in first: a cycle's cost grows with
  the queue, and reports left waiting make the next snapshot stale and longer.
- `EXPLAIN_SHARE`: after an explaining cycle that took t, the next explains no sooner than
  t × (1 / share − 1) later (nor sooner than `Timing.explain_every_s`): in a long queue the
  reasons and estimates cost several times the decisions, and freed GPUs wait through them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db.models import Count, Max, Q
from django.utils import timezone

from cluster.apply import Explanations, Notice, apply_decisions, stop_preempted, withdraw_notice
from cluster.duties import Clock
from cluster.intake import Intake
from cluster.kubecalls import KubeCalls
from cluster.locked import LockedJobs
from cluster.manifests import sigterm_lead
from cluster.policy import effective
from cluster.snapshot import RECENT_IDS, PolicyTables, QueuedRequests, build_snapshot, past_usage
from jobs.models import HOLDING_STATES, Job, State
from scheduler import PolicyConfig, decide

if TYPE_CHECKING:
    from cluster.controller import Stats, Timing

SCHEDULING_SHARE = 0.5
EXPLAIN_SHARE = 0.1


class Scheduling:
    def __init__(
        self,
        *,
        holder: str,
        config: PolicyConfig,
        timing: Timing,
        clock: Clock,
        stats: Stats,
        intake: Intake,
        kube: KubeCalls,
        writing: Callable[[], AbstractContextManager[LockedJobs]],
    ) -> None:
        self.holder, self.config, self.timing, self.clock = holder, config, timing, clock
        self.stats, self.intake, self.kube, self.writing = stats, intake, kube, writing
        self.usage: dict[str, float] = {}
        """Fair-share usage per team, at most `Timing.past_usage_every_s` old (its duty): it
        decays with a half-life of hours, so a minute's lag moves no team's place."""
        self._queued_marker: tuple[int, int] | None = None
        self.reset()

    def reset(self) -> None:
        """A new leader keeps nothing of a former lead: it explains at once and writes every
        waiting job's explanation afresh."""
        self.wanted = True
        self._paused_until = -math.inf
        self._explained_at, self._explain_gap = -math.inf, 0.0
        self.explanations = Explanations(
            refresh_s=self.timing.refresh_every_s,
            estimate_every_s=self.timing.estimate_every_s,
            clock=self.clock,
        )
        self.queued = QueuedRequests(self.clock)
        self.policy = PolicyTables(self.timing.policy_every_s, self.clock)

    def want(self) -> None:
        """Something changed: a cycle is due (debounced by the loop's turn)."""
        self.wanted = True

    def sooner(self) -> bool:
        """A change waits for its cycle only while a pause holds and reports wait: with none
        waiting, the pause would only leave freed GPUs idle."""
        paused = self.clock() < self._paused_until and not self.intake.seen.empty()
        return self.wanted and not paused

    def read_past_usage(self) -> None:
        self.usage = past_usage(self.config, timezone.now())

    def notice_submissions(self) -> bool:
        """Whether web processes queued something new: a new newest id, or a change among the
        recent ones (a submission that committed after a later one). Older changes (a waiting
        job cancelled) wait for the periodic cycle: counting the whole queue on every poll
        scanned thousands of rows many times a second."""
        top = self._queued_marker[1] if self._queued_marker else 0
        marker = Job.unscoped.filter(pk__gt=top - RECENT_IDS).aggregate(
            n=Count("id", filter=Q(state=State.QUEUED)), top=Max("id")
        )
        current = (marker["n"], marker["top"] or 0)
        if current == self._queued_marker:
            return False
        self._queued_marker = current
        self.want()
        return True

    def run(self) -> None:
        """The scheduling duty: reports that piled up first, then a cycle."""
        self.intake.catch_up()
        self.cycle()

    def cycle(self) -> None:
        started = self.clock()
        self.wanted = False
        now = timezone.now()
        explain = started - self._explained_at >= max(
            self.timing.explain_every_s, self._explain_gap
        )
        snapshot = build_snapshot(now, self.usage, self.queued, self.policy)
        read = self.clock()
        # The queue as kept between cycles (`QueuedRequests`), not sorted afresh every cycle.
        config = effective(self.config)  # the admin's choice of policy, from this cycle on
        decisions = decide(snapshot, self.queued.index, config, explain=explain)
        decided = self.clock()
        applied = apply_decisions(decisions, now, self.explanations, holder=self.holder)
        ended = self.clock()
        self.kube.delete_on_commit(applied.deletions)
        self.kube.notify_on_commit(applied.notices)
        self.queued.left(job.pk for job in applied.admitted)
        self.queued.returned(applied.requeued)
        for job in applied.admitted:
            self.kube.create(job)
        took = ended - started
        self._paused_until = ended + took * (1 / SCHEDULING_SHARE - 1)
        if explain:
            self._explained_at, self._explain_gap = ended, took * (1 / EXPLAIN_SHARE - 1)
        self._count(explain, len(applied.admitted), read - started, decided - read, ended - decided)

    def _count(self, explain: bool, admitted: int, *phases: float) -> None:
        stats = self.stats
        for phase, seconds in zip(("snapshot", "decide", "apply"), phases, strict=True):
            stats.phase_seconds[phase] += seconds
        stats.cycles += 1
        stats.admitted += admitted
        stats.cycle_seconds += sum(phases)
        if explain:
            stats.explaining += 1
            stats.explaining_seconds += sum(phases)

    def stop_due(self) -> None:
        """The stops duty: preempted jobs whose grace period ended, and cancelled jobs."""
        self._expire_grace()
        self._delete_cancelled()

    def _expire_grace(self) -> None:
        """Victims whose grace period enters its last `sigterm_lead` seconds: their pods get
        SIGTERM now (the Job is deleted; SIGKILL follows at the deadline), if the job they make
        room for still waits; otherwise the notice is withdrawn and they run on."""
        lead = timedelta(seconds=sigterm_lead(self.config.preemption_grace_s))
        due = Job.unscoped.filter(state__in=HOLDING_STATES, grace_until__lte=timezone.now() + lead)
        job_ids = list(due.values_list("id", flat=True))
        if not job_ids:
            return
        requeued: list[int] = []
        notices: list[Notice] = []
        with self.writing() as locked:
            locked.lock(job_ids)
            victims = [
                job
                for job in map(locked.get, job_ids)
                if job is not None and job.state in HOLDING_STATES and job.grace_until is not None
            ]
            waiting = set(
                Job.unscoped.filter(
                    pk__in={job.preempted_for_id for job in victims}, state=State.QUEUED
                ).values_list("id", flat=True)
            )
            for job in victims:
                if job.preempted_for_id not in waiting:
                    notices.append(withdraw_notice(job, "no longer waits", locked.moves))
                    continue
                reason = f"preempted for job {job.preempted_for_id} after its grace period"
                self.kube.delete_on_commit([stop_preempted(job, reason, locked.moves)])
                requeued.append(job.pk)
            self.kube.notify_on_commit(notices)
        if victims:
            self.want()
        self.queued.returned(requeued)

    def _delete_cancelled(self) -> None:
        cancelled = Job.unscoped.filter(state=State.CANCELLED).exclude(k8s_name="")
        for job in cancelled.select_related("team"):
            self.kube.delete_on_commit([(job.team.namespace, job.k8s_name)])
            Job.unscoped.filter(pk=job.pk).update(k8s_name="")
            self.want()
