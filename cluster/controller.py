"""The controller role: the clock and the brain (DESIGN.md sections 2 and 6).

One loop, one thread for everything that writes the database. While it holds the leader lease,
every turn walks its table of duties (`Controller.duties`, built by `_duties`) against its clock;
otherwise it stands by and asks for the lease again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from django.db import DatabaseError, close_old_connections

from audit.checkpoints import periodic_checkpoint
from base.streams import own_event_loop
from cluster import lease, observe
from cluster.backend import ClusterBackend, Obj, Unavailable
from cluster.duties import Clock, Duties, Duty, periodic_tasks
from cluster.intake import Intake
from cluster.kubecalls import KubeCalls
from cluster.locked import LockedJobs
from cluster.logs import LogFollowers
from cluster.provision import Provisioner
from cluster.reconcile import SELECTOR, WARNINGS, Reconciler
from cluster.scheduling import Scheduling
from cluster.watchers import Watcher
from jobs.streams import holding_usage, publish_usage
from scheduler import PolicyConfig
from tenants.models import Team

log = logging.getLogger(__name__)
STANDBY_RETRY_S = 1.0
"""A standby asks for the lease this often, so it leads within about this long of its expiry."""

AddedDuties = Callable[["Controller"], list[Duty]]
_added_duties: list[AddedDuties] = []


def add_duties(duties: AddedDuties) -> None:
    """Have every controller also run the duties `duties(controller)` makes: apps above
    `cluster` (monitoring: alert evaluation and the fault loop) join the table without
    `cluster` importing them. Called from their AppConfig.ready()."""
    if duties not in _added_duties:
        _added_duties.append(duties)


@dataclass
class Timing:
    """The periods of the controller's duties, in seconds of its clock."""

    debounce_s: float = 0.2
    """A turn waits up to this long for a watch report, and polls what web processes write at
    most this often: a burst of changes makes one cycle, not one each."""
    cycle_every_s: float = 5.0
    """The periodic fallback cycle, for what changes without a report (`cluster.scheduling`)."""
    stops_every_s: float = 0.5
    """A cancelled job's pods are told to stop, and a preempted job whose grace period has
    ended stops (freeing its GPUs), up to this much later."""
    explain_every_s: float = 2.0
    """Waiting jobs' reasons and estimates are worked out at most this often; the cycles
    between only admit and preempt (explaining a long queue costs more than deciding it)."""
    refresh_every_s: float = 15.0
    """A waiting job's figures are rewritten at most this often (`cluster.apply.Explanations`)."""
    estimate_every_s: float = 5.0
    """A waiting job's estimated start, once it has moved, is rewritten at most this often."""
    policy_every_s: float = 1.0
    """Teams, quotas and member caps a cycle reads are at most this old
    (`cluster.snapshot.PolicyTables`): edits are rare, and reading them was a third of a cycle."""
    reconcile_every_s: float = 30.0
    """Resync with the watch's copy, team namespaces, and the audit chain's checkpoint."""
    past_usage_every_s: float = 60.0
    """Fair-share usage (decaying over hours) is read afresh this often."""
    usage_figures_every_s: float = 1.0
    """A team's usage figures (GPUs held against quota) go out at most this often."""
    renew_every_s: float = 2.0
    """Well within the lease's TTL (`cluster.lease.TTL`): only a stalled leader loses it."""


@dataclass
class Stats:
    cycles: int = 0
    explaining: int = 0
    """Of `cycles`: those that worked out and wrote the waiting jobs' reasons and estimates."""
    explaining_seconds: float = 0.0
    admitted: int = 0
    relists: int = 0
    strays_deleted: int = 0
    cycle_seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Of `cycle_seconds`: reading the snapshot, deciding, and applying the decisions."""
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Watch reports taken in, by kind and type."""


class Controller:
    def __init__(
        self,
        backend: ClusterBackend,
        *,
        identity: str | None = None,
        config: PolicyConfig | None = None,
        timing: Timing | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.backend, self.clock = backend, clock
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self.timing = timing or Timing()
        self.stats = Stats()
        self.leading = False
        self.turned_at: float | None = None
        """When the run loop last began a turn (leading or standing by), on `clock`."""
        self.kube = KubeCalls(backend)
        self.followers = LogFollowers(backend)
        self.provisioner = Provisioner(backend)
        changed = self._changed
        self.intake = Intake(
            backend, self.kube, self.followers, self.stats, self.writing, changed, self._listed
        )
        self.reconciler = Reconciler(
            backend, self.intake, self.kube, self.provisioner, self.stats, self.writing, changed
        )
        self.scheduling = Scheduling(
            holder=self.identity,
            config=config or PolicyConfig(),
            timing=self.timing,
            clock=clock,
            stats=self.stats,
            intake=self.intake,
            kube=self.kube,
            writing=self.writing,
        )
        self.duties = Duties(clock, self._duties())
        self._watch_stop = threading.Event()
        self._usage_teams: dict[int, Team] = {}  # held GPUs changed; figures not sent yet

    def _duties(self) -> list[Duty]:
        timing, scheduling = self.timing, self.scheduling
        return [
            Duty("renew", timing.renew_every_s, self._renew, "a leader that stalls is replaced"),
            Duty("reports", 0.0, self._take_reports, "every turn: what the watches saw"),
            Duty(
                "submissions",
                timing.debounce_s,
                scheduling.notice_submissions,
                "web processes queue jobs; most polls find nothing new",
            ),
            Duty(
                "resync",
                timing.reconcile_every_s,
                self._periodic_reconcile,
                "what a dropped report or a failed call left behind; namespaces; the audit "
                "chain's head anchored outside the database",
            ),
            Duty("past usage", timing.past_usage_every_s, scheduling.read_past_usage, "fair share"),
            Duty(
                "schedule",
                timing.cycle_every_s,
                scheduling.run,
                "when something changed (`Scheduling.sooner`), else as a fallback",
                sooner=scheduling.sooner,
            ),
            Duty("stops", timing.stops_every_s, scheduling.stop_due, "grace periods, cancels"),
            Duty(
                "usage figures",
                timing.usage_figures_every_s,
                self._publish_usage,
                "teams' GPUs held, at most once a period, not once per batch",
            ),
            *(duty for added in _added_duties for duty in added(self)),
            *periodic_tasks(),
        ]

    # -- the loop ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Lead while holding the lease, stand by otherwise, until `stop` is set."""
        try:
            with own_event_loop():
                self._run(stop)
        finally:
            self.stop_leading(release=True)

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.turned_at = self.clock()  # the liveness probe's heartbeat (cluster/probes.py)
            try:
                if not self.leading:
                    if not lease.try_acquire(self.identity):
                        stop.wait(STANDBY_RETRY_S)
                        continue
                    self.start_leading()
                self.step()
            except Unavailable as exc:
                log.warning("cluster API unavailable: %s", exc)
                stop.wait(STANDBY_RETRY_S)
            except DatabaseError as exc:  # rolled back whole; the next turn redoes it
                log.warning("database: %s", exc)
                close_old_connections()
                stop.wait(STANDBY_RETRY_S / 2)

    def start_leading(self) -> None:
        """Forget what a former lead knew, list the cluster, start watching from there."""
        log.info("controller %s leads", self.identity)
        self.leading = True
        self.intake.forget()
        self.scheduling.reset()
        self.duties.all_due()
        self._watch_stop = threading.Event()
        try:
            versions = self.reconciler.listed()
        except lease.Lost:  # taken over already: the lease expired while listing
            self.stop_leading()
            return
        self.duties.ran("renew", "resync")
        watchers = [
            Watcher(
                self.backend,
                kind,
                "" if kind in ("nodes", "events") else SELECTOR,
                version,
                self.intake.seen,
                self._watch_stop,
                fields=WARNINGS if kind == "events" else "",
            )
            for kind, version in versions.items()
        ]
        for watcher in watchers:
            watcher.start()

    def stop_leading(self, *, release: bool = False) -> None:
        self._watch_stop.set()
        if self.leading and release:
            lease.release(self.identity)
        self.leading = False

    def step(self) -> None:
        """One turn: every duty that is due, in the table's order."""
        try:
            with holding_usage(self._usage_teams):
                self.duties.run_due()
        except lease.Lost:  # found by a renewal or inside a writing transaction (rolled back)
            log.warning("controller %s lost the lease; standing by", self.identity)
            self.stop_leading()

    # -- seams ---------------------------------------------------------------------------------

    def writing(self) -> AbstractContextManager[LockedJobs]:
        """One fenced transaction of the leader's (`cluster.observe.writing`)."""
        return observe.writing(self.identity, observe.REPORT_FIELDS)

    def cycle(self) -> None:
        """One scheduling cycle now."""
        self.scheduling.cycle()

    def resync(self) -> None:
        """Reconcile the database with the watch's copy of the cluster now."""
        with self.writing() as locked:
            self.reconciler.resync(list(self.intake.cluster_jobs.values()), locked)

    # -- duties --------------------------------------------------------------------------------

    def _renew(self) -> None:
        if not lease.try_acquire(self.identity):
            raise lease.Lost(f"controller {self.identity} could not renew its lease")

    def _take_reports(self) -> None:
        self.intake.drain(self.timing.debounce_s)

    def _periodic_reconcile(self) -> None:
        self.resync()
        self.provisioner.sync()
        periodic_checkpoint()

    def _publish_usage(self) -> None:
        teams = list(self._usage_teams.values())
        self._usage_teams.clear()  # (the dict `holding_usage` fills)
        publish_usage(teams)

    def _changed(self) -> None:
        self.scheduling.want()

    def _listed(self, items: list[Obj], locked: LockedJobs) -> None:
        self.reconciler.resync(items, locked)
