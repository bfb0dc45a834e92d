"""Build the scheduler's snapshot from the database: the portal's records are the truth.

Free GPUs per node are the node's allocatable GPUs, less those marked unhealthy (a fatal Xid,
`monitoring.xids`), minus what the portal has placed there (admitted and running jobs), so a job
admitted a moment ago counts before its pods exist. Cordoned and NotReady nodes are passed on as
such and the scheduler leaves them out of its capacity.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, F, Q, Sum, Window
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone

from cluster.models import Node
from jobs.models import HOLDING_STATES, Job, State
from jobs.sweeps import within_max_parallel
from quotas.models import MemberCap, Queue, Quota
from scheduler import (
    JobRequest,
    NodeState,
    PolicyConfig,
    QuotaInfo,
    RunningJob,
    Snapshot,
    TeamInfo,
)
from scheduler import MemberCap as CapInfo
from scheduler.history import WINDOW, RuntimeHistory
from scheduler.queue import QueueIndex
from tenants.models import Team


def _ts(moment: datetime | None) -> float:
    return moment.timestamp() if moment else 0.0


# Read as plain rows: building a model instance (and its four related ones) per job was most of
# a cycle's cost once thousands of jobs wait.
_REQUEST = (
    "id",
    "team__slug",
    "owner__username",
    "gpu_type__name",
    "nodes",
    "gpus_per_node",
    "submitted_at",
    "max_runtime",
    "queue__priority",
    "queue__preemptible",
    "image",
    "attempts",  # last: `_holding` reads it by position
)
_RUNNING = ("started_at", "admitted_at", "placement", "grace_until", "preempted_for_id")
_QUEUED = (*_REQUEST, "preempted_for_id")
"""A queued job's `preempted_for` is the job it was stopped for, which it yields to."""


def _request(
    row: tuple[Any, ...], stops: int | None = None, yields_to: int | None = None
) -> JobRequest:
    """A job's request; `stops`: times it was stopped and queued again (by default, a queued
    job's admissions so far: each of them ended in a stop); `yields_to`: the job a queued one
    was preempted for."""
    job_id, team, member, gpu_type, nodes, gpus, submitted, max_runtime, *rest = row
    priority, preemptible, image, attempts = rest
    return JobRequest(
        id=job_id,
        team=team,
        member=member,
        gpu_type=gpu_type,
        nodes=nodes,
        gpus_per_node=gpus,
        submit_time=_ts(submitted),
        runtime_limit_s=float(max_runtime),
        priority=priority,
        preemptible=preemptible,
        image=image,
        restarts=attempts if stops is None else stops,
        yields_to=yields_to,
    )


LEARNT_FROM_S = 30 * 24 * 3600.0
"""Runtimes are learnt from the jobs submitted this far back that succeeded."""


def learnt_runtimes(now: datetime) -> RuntimeHistory:
    """What `scheduler.history` learns from the jobs that succeeded, in one query.

    Only a succeeded job ran as long as it needed (a failed or cancelled one was cut short),
    and its `started_at` is that of its last attempt (a requeue clears it). Only the newest
    `WINDOW` runs of each member, image and size are read: the history keeps no more of the
    narrowest key, and the newest of a wider key are among the newest of its narrower ones.
    Bounded by submission, not by end, so that the (state, submitted_at) index serves it.
    """
    key = ("owner_id", "image", "nodes", "gpus_per_node")
    rows = (
        Job.unscoped.filter(
            state=State.SUCCEEDED,
            submitted_at__gte=now - timedelta(seconds=LEARNT_FROM_S),
            started_at__isnull=False,
            finished_at__isnull=False,
        )
        .annotate(
            newest=Window(
                RowNumber(), partition_by=[F(k) for k in key], order_by=F("finished_at").desc()
            )
        )
        .filter(newest__lte=WINDOW)
        .order_by("finished_at", "id")
        .values_list(
            "owner__username",
            "image",
            "nodes",
            "gpus_per_node",
            "started_at",
            "finished_at",
            "max_runtime",
        )
    )
    history = RuntimeHistory()
    for member, image, nodes, gpus, started, finished, limit in rows:
        assert started is not None and finished is not None  # filtered above
        runtime = (finished - started).total_seconds()
        history.record_run(member, image, nodes, gpus, runtime, float(limit))
    return history


RECENT_IDS = 1000
"""Submissions commit out of id order only among the newest jobs: each takes its id when it
begins and becomes visible when it commits, so one may appear below an id already seen. Ids
further back than this are taken as settled (and checked, see `QueuedRequests`)."""

_HASH_MULTIPLIER, _HASH_MODULUS = 1000003, 2147483647


def _id_hash(job_id: int) -> int:
    """What the queue's checksum adds up per id, as `_settled` works it out in the database."""
    return job_id * _HASH_MULTIPLIER % _HASH_MODULUS


def _settled(up_to: int) -> tuple[int, int, int]:
    """Count, sum and hashed sum of the queued ids up to `up_to`, in one query."""
    figures = Job.unscoped.filter(state=State.QUEUED, pk__lte=up_to).aggregate(
        count=Count("*"),
        total=Coalesce(Sum("pk"), 0),
        hashed=Coalesce(Sum(F("pk") * _HASH_MULTIPLIER % _HASH_MODULUS), 0),
    )
    return figures["count"], int(figures["total"]), int(figures["hashed"])


class _Checksum:
    """Count, sum and hashed sum of a set of ids, kept as ids come and go: two different sets
    agree on all three only by a coincidence no queue arranges."""

    def __init__(self) -> None:
        self.count = self.total = self.hashed = 0

    def add(self, job_id: int, sign: int = 1) -> None:
        self.count += sign
        self.total += sign * job_id
        self.hashed += sign * _id_hash(job_id)

    def without(self, job_ids: Iterable[int]) -> tuple[int, int, int]:
        count, total, hashed = self.count, self.total, self.hashed
        for job_id in job_ids:
            count, total, hashed = count - 1, total - job_id, hashed - _id_hash(job_id)
        return count, total, hashed


class QueuedRequests:
    """The queue as the scheduler sees it, kept between cycles.

    A queued job's request does not change but for its queue's priority and preemptibility, so
    a cycle reads whole rows only of jobs it has not seen before, instead of thousands of whole
    rows with four joins each time. The requests are also kept in a `QueueIndex` (the
    scheduler's streams, in team order), changed by the jobs that joined and left since the
    last cycle instead of sorted whole every cycle, as the simulator keeps its own.

    Nor are the queued ids all read again each cycle (10,000 of them took 14 ms, a fifth of a
    cycle, in the Kueue replay). A cycle reads the queued ids among the newest `RECENT_IDS`,
    where submissions land, and one checksum of the older ones, which only a cancel, a requeue
    or a very late commit changes; the jobs the controller admits it is told of (`left`), and
    those it puts back in the queue (`returned`: preempted, hundreds in the Kueue replay, each
    had the next cycle read every queued id). Where the checksum disagrees with what is kept,
    every queued id is read as before.
    Everything is read afresh every REFRESH_S of `clock` (the controller's), so a renamed owner
    or team shows within that time; so are the runtimes learnt from finished jobs
    (`learnt_runtimes`, one query), which set each request's expected runtime (`runtimes`).
    """

    REFRESH_S = 60.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._known: dict[int, JobRequest] = {}
        """By id, in id order."""
        self._checksum = _Checksum()
        self._queues: dict[int, tuple[int, bool]] = {}
        self.index = QueueIndex()
        self._read_at = self._learnt_at = -math.inf
        self._returned: set[int] = set()
        self._history = RuntimeHistory()

    def runtimes(self) -> RuntimeHistory:
        """The runtimes learnt from finished jobs, read again every REFRESH_S; the requests kept
        are read again at the next `current()`, so that they carry the new predictions."""
        if self.clock() - self._learnt_at >= self.REFRESH_S:
            self._history, self._learnt_at = learnt_runtimes(timezone.now()), self.clock()
        return self._history

    def current(self) -> list[JobRequest]:
        """The queued jobs' requests, in id order; `index` holds the same."""
        if self.clock() - self._read_at >= self.REFRESH_S or self._learnt_at > self._read_at:
            self._known, self._checksum, self.index = {}, _Checksum(), QueueIndex()
            self.runtimes()
            self._read_at = self.clock()
        queues = {
            queue_id: (priority, preemptible)
            for queue_id, priority, preemptible in Queue.unscoped.order_by().values_list(
                "id", "priority", "preemptible"
            )
        }
        if self._returned:
            self._read(self._returned - self._known.keys())
            self._returned.clear()
        if queues != self._queues or not self._newest_only():
            self._read_all(queues)
        return list(self._known.values())

    def left(self, job_ids: Iterable[int]) -> None:
        """These jobs left the queue (the controller admitted them and committed)."""
        for job_id in job_ids:
            request = self._known.pop(job_id, None)
            if request is not None:
                self.index.remove(request)
                self._checksum.add(job_id, -1)

    def returned(self, job_ids: Iterable[int]) -> None:
        """These jobs are back in the queue (the controller requeued them and committed): read
        at the next `current()`, they leave the older ids' checksum as it was."""
        self._returned.update(job_ids)

    def _newest_only(self) -> bool:
        """Bring the newest ids up to date; False where the older ones moved too, or where the
        queue is short enough that reading it whole costs no more than the checksum's query."""
        if len(self._known) < 2 * RECENT_IDS:
            return False
        settled = next(reversed(self._known)) - RECENT_IDS
        recent = []  # known ids above `settled`, newest first
        for job_id in reversed(self._known):
            if job_id <= settled:
                break
            recent.append(job_id)
        if _settled(settled) != self._checksum.without(recent):
            return False
        queued = set(
            Job.unscoped.filter(state=State.QUEUED, pk__gt=settled)
            .order_by()
            .values_list("id", flat=True)
        )
        self.left(set(recent) - queued)
        self._read(queued - self._known.keys())
        return True

    def _read_all(self, queues: dict[int, tuple[int, bool]]) -> None:
        # Unordered: only which ids are there matters, and sorting thousands cost the server.
        queued = dict(
            Job.unscoped.filter(state=State.QUEUED).order_by().values_list("id", "queue_id")
        )
        self.left(self._known.keys() - queued.keys())
        self._read(queued.keys() - self._known.keys())
        if queues != self._queues:  # a queue's priority or preemptibility changed
            for job_id, queue_id in queued.items():
                request = self._known.get(job_id)
                if request is None:  # deleted since its id was read
                    continue
                priority, preemptible = queues[queue_id]
                if (request.priority, request.preemptible) != (priority, preemptible):
                    self.index.remove(request)
                    request = replace(request, priority=priority, preemptible=preemptible)
                    self._known[job_id] = request
                    self.index.add(request)
            self._queues = queues

    def _read(self, job_ids: set[int]) -> None:
        wanted = sorted(job_ids)
        out_of_order = bool(wanted and self._known and wanted[0] < next(reversed(self._known)))
        history = self._history
        for start in range(0, len(wanted), 1000):
            chunk = wanted[start : start + 1000]
            rows = Job.unscoped.filter(pk__in=chunk, state=State.QUEUED).values_list(*_QUEUED)
            for row in sorted(rows):
                request = history.predicted(_request(row[:-1], yields_to=row[-1]))
                self._known[row[0]] = request
                self.index.add(request)
                self._checksum.add(row[0])
        if out_of_order:  # a job queued again, or a submission that committed late
            self._known = dict(sorted(self._known.items()))


def _holding(history: RuntimeHistory) -> list[RunningJob]:
    """The jobs holding GPUs, their runtimes predicted from `history` as the queued ones'."""
    rows = (
        Job.unscoped.filter(state__in=HOLDING_STATES)
        .order_by("id")
        .values_list(*_REQUEST, *_RUNNING)
    )
    running = []
    for row in rows:
        started, admitted, placement, grace_until, preempted_for = row[len(_REQUEST) :]
        attempts = row[len(_REQUEST) - 1]
        running.append(
            RunningJob(
                # Running its latest attempt: the ones before it were stopped.
                job=history.predicted(_request(row[: len(_REQUEST)], stops=max(0, attempts - 1))),
                start_time=_ts(started or admitted),
                placement=tuple(sorted((node, int(gpus)) for node, gpus in placement.items())),
                grace_until=_ts(grace_until) if grace_until else None,
                preempted_for=preempted_for,
            )
        )
    return running


# Only what the scheduler reads: the whole row (its labels' JSON, a model instance and its GPU
# type's per node) cost 3 ms of the controller's CPU every cycle for thirty nodes.
_NODE = (
    "name",
    "gpu_type__name",
    "gpu_capacity",
    "gpu_allocatable",
    "unhealthy",
    "rack",
    "nvlink_domain",
    "cordoned",
    "ready",
)


def usable_gpus(capacity: int, allocatable: int, unhealthy: int) -> int:
    """GPUs of a node the scheduler may place on: allocatable, less those marked unhealthy.

    A device plugin that noticed the fault already left the GPU out of allocatable (capacity
    keeps it): the GPU counts once, not twice.
    """
    return max(0, min(allocatable, max(capacity, allocatable) - unhealthy))


def _nodes(holding: list[RunningJob]) -> tuple[NodeState, ...]:
    used: dict[str, int] = defaultdict(int)
    for job in holding:
        for node, gpus in job.placement:
            used[node] += gpus
    rows = (
        Node.objects.filter(gpu_type__isnull=False)
        .annotate(unhealthy=Count("gpus", filter=Q(gpus__healthy=False)))
        .values_list(*_NODE)
    )
    states = []
    for name, gpu_type, capacity, allocatable, unhealthy, rack, nvlink, cordoned, ready in rows:
        total = usable_gpus(capacity, allocatable, unhealthy)
        states.append(
            NodeState(
                name=name,
                gpu_type=gpu_type,
                total_gpus=total,
                installed_gpus=max(capacity, allocatable),  # healthy or not: what could ever fit
                free_gpus=max(0, total - used[name]),
                labels={"rack": rack, "nvlink_domain": nvlink},
                cordoned=cordoned,
                ready=ready,
            )
        )
    return tuple(states)


def past_usage(config: PolicyConfig, now: datetime) -> dict[str, float]:
    """GPU-seconds per team, each job's share halved every `fair_half_life_s` since it ended."""
    horizon = now - timedelta(seconds=4 * config.fair_half_life_s)
    usage: dict[str, float] = defaultdict(float)
    rows = (
        Job.unscoped.filter(finished_at__gte=horizon, started_at__isnull=False)
        .values_list("team__slug", "nodes", "gpus_per_node", "started_at", "finished_at")
        .iterator(chunk_size=5000)
    )
    for team, nodes, gpus, started, finished in rows:
        assert started is not None and finished is not None  # filtered above
        age = (now - finished).total_seconds()
        seconds = (finished - started).total_seconds() * nodes * gpus
        usage[team] += seconds * math.pow(0.5, age / config.fair_half_life_s)
    return dict(usage)


Policy = tuple[tuple[TeamInfo, ...], tuple[QuotaInfo, ...], tuple[CapInfo, ...]]


def _read_policy() -> Policy:
    teams = tuple(
        TeamInfo(
            name=t.slug, department=t.parent.slug if t.parent else None, weight=t.fair_share_weight
        )
        for t in Team.objects.select_related("parent")
    )
    quotas = tuple(
        QuotaInfo(
            team=q.team.slug, gpu_type=q.gpu_type.name, guaranteed=q.guaranteed, limit=q.limit
        )
        for q in Quota.unscoped.select_related("team", "gpu_type")
    )
    caps = tuple(
        CapInfo(team=c.team.slug, member=c.user.get_username(), max_gpus=c.max_gpus)
        for c in MemberCap.unscoped.select_related("team", "user")
    )
    return teams, quotas, caps


class PolicyTables:
    """Teams, quotas and member caps as the scheduler reads them, re-read at most every
    `max_age_s`.

    Leads and admins change them now and then; the controller read them every cycle, three of
    its snapshot's seven queries and about a third of its time in the Kueue replay, while a
    freed node waited for the cycle. An edit reaches the scheduler up to `max_age_s` later (the
    cycle after an edit may already come up to `Timing.cycle_every_s` later). Ages are read on
    `clock`, the controller's.
    """

    def __init__(self, max_age_s: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s, self.clock = max_age_s, clock
        self._read_at = -math.inf
        self._tables: Policy | None = None

    def current(self) -> Policy:
        now = self.clock()
        if self._tables is None or now - self._read_at >= self.max_age_s:
            self._tables, self._read_at = _read_policy(), now
        return self._tables


Holds = Mapping[str, Mapping[str, int | float | str]]
"""Team slug -> the figures its waiting jobs show (`Snapshot.holds`)."""
HoldSource = Callable[[datetime], Holds]
_hold_sources: list[HoldSource] = []


def add_hold(source: HoldSource) -> None:
    """Have every snapshot hold the teams `source(now)` names: their waiting jobs do not start
    (billing: a team past its budget with a hard stop), without `cluster` importing the app
    that decides it. Called from its AppConfig.ready(); `source` runs once per cycle, so it
    must be cheap (billing caches its figures)."""
    if source not in _hold_sources:
        _hold_sources.append(source)


def _holds(now: datetime) -> dict[str, Mapping[str, int | float | str]]:
    held: dict[str, Mapping[str, int | float | str]] = {}
    for source in _hold_sources:
        held.update(source(now))
    return held


def build_snapshot(
    now: datetime,
    usage: dict[str, float],
    queued: QueuedRequests | None = None,
    policy: PolicyTables | None = None,
) -> Snapshot:
    queued = queued or QueuedRequests()
    holding = _holding(queued.runtimes())
    teams, quotas, caps = (policy or PolicyTables()).current()
    return Snapshot(
        now=now.timestamp(),
        queued=tuple(within_max_parallel(queued)),
        running=tuple(holding),
        nodes=_nodes(holding),
        teams=teams,
        quotas=quotas,
        member_caps=caps,
        past_usage=usage,
        holds=_holds(now),
    )
