"""The controller role: the clock and the brain (DESIGN.md sections 2 and 6).

One loop, one thread for everything that writes the database: it drains what the watchers saw,
maps it onto job states, and runs a scheduling cycle when something changed (debounced) or the
periodic fallback is due, then tells Kubernetes. It acts only while it holds the leader lease.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from audit.checkpoints import periodic_checkpoint
from audit.record import record
from cluster import lease
from cluster.apply import Explanations, apply_decisions, stop_preempted
from cluster.backend import ClusterBackend, Obj, Unavailable
from cluster.inventory import gpu_types_by_label, sync_node, sync_nodes
from cluster.locked import LockedJobs
from cluster.logs import LogFollowers
from cluster.manifests import FINISHED_TTL_S, LABEL_JOB, LABEL_MANAGED, PORTAL, job_object
from cluster.observe import (
    REPORT_FIELDS,
    awaits_ttl,
    explain_admitted,
    ids_of,
    job_may_move,
    job_signature,
    node_lost,
    observe_job,
    observe_pod,
    pod_may_move,
    pod_signature,
    portal_job_id,
    slim_job,
    slim_pod,
    writing,
)
from cluster.pool import RankedPool
from cluster.provision import Provisioner
from cluster.snapshot import (
    RECENT_IDS,
    PolicyTables,
    QueuedRequests,
    build_snapshot,
    past_usage,
)
from cluster.watchers import Seen, Watcher
from jobs.models import HOLDING_STATES, TERMINAL_STATES, Job, State
from jobs.states import transition
from jobs.streams import holding_usage, own_event_loop, publish_usage
from scheduler import PolicyConfig, decide
from tenants.models import Team

log = logging.getLogger(__name__)
SELECTOR = f"{LABEL_MANAGED}={PORTAL}"
WARNINGS = "type=Warning"  # the only Events the controller acts on (`explain_admitted`)
MAX_BATCH = 2000
"""Watch reports applied in one transaction at most, so one turn never outlasts the lease."""
KUBE_THREADS = 24
"""Creates and deletes in flight at once. A cycle admits hundreds of jobs together, and each
holds its GPUs from its admission: with 8, small jobs waited 0.75 s for their create in the
Kueue replay, each create taking about 40 ms, mostly waiting for the API server's loop and
this process's interpreter lock, not working. Within `load_api_client`'s 64 connections.

Deletes go first (they free GPUs that admitted jobs' pods wait for), then creates by the GPUs
their jobs hold, most first (`cluster.pool`)."""
DELETE_RANK = (0.0,)
EXPIRE_RANK = (2.0,)
"""Setting finished Jobs' TTL waits for every delete and create: nothing waits for it."""
OUTCOME_UNKNOWN = (
    "outcome unknown: its Job was deleted from the cluster before the portal recorded how it "
    "ended; not run again, resubmit it if it should run"
)
USAGE_EVERY_S = 1.0
"""A team's usage figures (GPUs held against quota) go out at most this often."""
SCHEDULING_SHARE = 0.5
"""At most about this share of the loop's time goes to scheduling cycles: after a cycle that
took t, the next waits t × (1 / share − 1). A cycle's cost grows with the queue; without this,
a long queue would have the loop cycling back to back while watch reports pile up, and every
report left waiting makes the next cycle's snapshot longer still."""
EXPLAIN_SHARE = 0.1
"""At most about this share of the loop's time goes to explaining cycles: after one that took t,
the next explains no sooner than t × (1 / share − 1) later (nor sooner than
`Timing.explain_every_s`). In the Kueue replay's overloaded queue (thousands waiting), an
explaining cycle took 450 ms against 90 for one that only decides: a sixth of the loop's time,
while freed GPUs and watch reports waited through each."""


@dataclass
class Timing:
    debounce_s: float = 0.2
    cycle_every_s: float = 5.0
    stops_every_s: float = 0.5
    """How often cancelled jobs and ended grace periods are looked for. A cancelled job's GPUs
    are free to the scheduler at once, and this is when its pods are told to stop; a preempted
    job whose grace period has ended stops (and frees its GPUs) up to this much later."""
    explain_every_s: float = 2.0
    """Waiting jobs' reasons and estimates are worked out and written at most this often; the
    cycles between only admit and preempt. A long queue's explanations (an estimate for every
    job, and the rows whose figures moved) cost more than the decisions, every cycle."""
    refresh_every_s: float = 15.0
    """A waiting job's figures (jobs ahead, GPUs free), and its reason while it moves among the
    ways of waiting for GPUs, are rewritten at most this often (`cluster.apply.Explanations`)."""
    estimate_every_s: float = 5.0
    """A waiting job's estimated start, once it has moved, is rewritten at most this often."""
    policy_every_s: float = 1.0
    """Teams, quotas and member caps are read for a cycle at most this often
    (`cluster.snapshot.PolicyTables`)."""
    reconcile_every_s: float = 30.0
    usage_every_s: float = 60.0
    renew_every_s: float = 2.0


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
    last_reconcile: float = 0.0
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class Controller:
    def __init__(
        self,
        backend: ClusterBackend,
        *,
        identity: str | None = None,
        config: PolicyConfig | None = None,
        timing: Timing | None = None,
    ) -> None:
        self.backend = backend
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self.config = config or PolicyConfig()
        self.timing = timing or Timing()
        self.seen: queue.Queue[Seen] = queue.Queue()
        self.pods: dict[str, dict[str, Obj]] = defaultdict(dict)
        self.cluster_jobs: dict[tuple[str, str], Obj] = {}
        """The portal's Jobs as the watch last reported them, by (namespace, name)."""
        self.kube_pool = RankedPool(KUBE_THREADS, "kube")
        self._creating: dict[str, Future[None]] = {}
        """Creates sent to the pool and not yet answered, by Job name."""
        self._deleting: set[str] = set()
        """Jobs the controller is deleting (not strays), until the watch stops reporting them."""
        self._deleting_lock = threading.Lock()
        self.followers = LogFollowers(backend)
        self.provisioner = Provisioner(backend)
        self.stats = Stats()
        self.leading = False
        self._watch_stop = threading.Event()
        self._watchers: list[Watcher] = []
        self._dirty = True
        self._last = {
            "cycle": 0.0,
            "reconcile": 0.0,
            "usage": -1e9,
            "renew": 0.0,
            "poll": 0.0,
            "stops": 0.0,
            "usage_sent": 0.0,
            "explain": -1e9,
        }
        self._next_cycle = 0.0  # monotonic time before which no event-driven cycle runs
        self._explain_gap = 0.0  # seconds from one explaining cycle to the next (EXPLAIN_SHARE)
        self._queued_marker: tuple[int, int] | None = None
        self._usage: dict[str, float] = {}
        # What was last mapped per object, so repeated reports of the same state cost nothing.
        self._signatures: dict[str, tuple[object, ...]] = {}
        self._followed: set[str] = set()
        self.explanations = Explanations(
            refresh_s=self.timing.refresh_every_s, estimate_every_s=self.timing.estimate_every_s
        )
        self.queued = QueuedRequests()
        self.policy = PolicyTables(self.timing.policy_every_s)
        self._usage_teams: dict[int, Team] = {}  # held GPUs changed; figures not sent yet
        self.locked = LockedJobs()  # replaced by each `writing()` block's own

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
            try:
                if not self.leading:
                    if not lease.try_acquire(self.identity):
                        stop.wait(1.0)
                        continue
                    self.start_leading()
                self.step()
            except Unavailable as exc:
                log.warning("cluster API unavailable: %s", exc)
                stop.wait(1.0)
            except DatabaseError as exc:  # rolled back whole; the next turn redoes it
                log.warning("database: %s", exc)
                close_old_connections()
                stop.wait(0.5)

    def start_leading(self) -> None:
        log.info("controller %s leads", self.identity)
        self.leading = True
        self._signatures.clear()
        self._followed.clear()
        self.explanations = Explanations(
            refresh_s=self.timing.refresh_every_s, estimate_every_s=self.timing.estimate_every_s
        )
        self._last["explain"], self._explain_gap = -1e9, 0.0  # a new leader explains at once
        self.queued = QueuedRequests()
        self.policy = PolicyTables(self.timing.policy_every_s)
        self._watch_stop = threading.Event()
        try:
            versions = self.reconcile()
        except lease.Lost:  # taken over already: the lease expired while listing
            self.stop_leading()
            return
        self._watchers = [
            Watcher(
                self.backend,
                kind,
                "" if kind in ("nodes", "events") else SELECTOR,
                version,
                self.seen,
                self._watch_stop,
                fields=WARNINGS if kind == "events" else "",
            )
            for kind, version in versions.items()
        ]
        for watcher in self._watchers:
            watcher.start()

    def stop_leading(self, *, release: bool = False) -> None:
        self._watch_stop.set()
        if self.leading and release:
            lease.release(self.identity)
        self.leading = False

    def step(self) -> None:
        """One turn: renew, take in what was seen, schedule if due, finish what is pending."""
        try:
            with holding_usage(self._usage_teams):
                self._turn()
        except lease.Lost:  # found inside a writing transaction, which rolled back whole
            log.warning("controller %s lost the lease; standing by", self.identity)
            self.stop_leading()
            return
        now = time.monotonic()
        if self._usage_teams and now - self._last["usage_sent"] >= USAGE_EVERY_S:
            teams, self._usage_teams = list(self._usage_teams.values()), {}
            publish_usage(teams)
            self._last["usage_sent"] = now

    def _turn(self) -> None:
        now = time.monotonic()
        if now - self._last["renew"] >= self.timing.renew_every_s:
            if not lease.try_acquire(self.identity):
                log.warning("controller %s lost the lease; standing by", self.identity)
                self.stop_leading()
                return
            self._last["renew"] = now
        self._drain(self.timing.debounce_s)
        # What the web role writes is polled at most once per debounce interval: a busy loop
        # turns many times a second, and these queries find nothing new on most turns.
        polling = now - self._last["poll"] >= self.timing.debounce_s
        if polling:
            self._notice_submissions()
            self._last["poll"] = now
        if now - self._last["reconcile"] >= self.timing.reconcile_every_s:
            # From what the watch holds, as an informer resyncs: listing every Job again (an
            # hour of finished ones among them) cost more than all the rest of the turn.
            with self._writing():
                self._resync(list(self.cluster_jobs.values()))
            self.provisioner.sync()
            periodic_checkpoint()  # the audit chain's head, anchored outside the database
            self._last["reconcile"] = now
        periodic = now - self._last["cycle"] >= self.timing.cycle_every_s
        # The pause after a cycle (SCHEDULING_SHARE) is for the reports that piled up meanwhile:
        # with none waiting, it would only leave freed GPUs idle until it ends.
        paused = now < self._next_cycle and not self.seen.empty()
        if (self._dirty and not paused) or periodic:
            self._catch_up()
            self.cycle()
        if now - self._last["stops"] >= self.timing.stops_every_s:
            self._expire_grace()
            self._delete_cancelled()
            self._last["stops"] = now

    # -- taking in what the cluster reports -------------------------------------------------------

    @contextmanager
    def _writing(self) -> Iterator[None]:
        with writing(self.identity, REPORT_FIELDS) as self.locked:
            yield

    def _catch_up(self) -> None:
        """Take in what the watches reported while the loop was busy, before a cycle reads
        its snapshot.

        Reports pile up during a cycle or a large batch: hundreds at 250 jobs a second. Left
        waiting, jobs that had ended still looked like they held their GPUs, and the scheduler
        preempted them (to run again, from the start) or left their GPUs idle for a cycle.
        """
        if not self.seen.empty():
            self._drain(0.0)

    def _drain(self, wait_s: float) -> None:
        try:
            first = self.seen.get(timeout=wait_s)
        except queue.Empty:
            return
        batch = [first]
        while len(batch) < MAX_BATCH:
            try:
                batch.append(self.seen.get_nowait())
            except queue.Empty:
                break
        # One transaction (one commit) for the whole batch, the jobs it is about locked in one
        # query and their changes written together: at hundreds of events a second the round
        # trips, not the work, were the cost. If it fails, nothing of it was applied and the
        # next reconciliation maps the listed objects again.
        try:
            with self._writing():
                self.locked.lock(self._moving(batch))
                for seen in batch:
                    self.stats.counts[f"{seen.kind}.{seen.type}"] += 1
                    if seen.type == "RELIST":
                        self._relisted(seen)
                    elif seen.object is not None:
                        self._event(seen.kind, seen.type, seen.object)
        except DatabaseError:
            self._signatures.clear()
            raise

    def _moving(self, batch: list[Seen]) -> set[int]:
        """The portal jobs this batch's reports may move, to lock together in one query.

        Most reports move nothing: a pod created or scheduled, a Job counting its pods, the
        same state again. Locking (and loading) every job a batch mentions was the larger part
        of taking reports in; one that turns out to be needed after all is locked on its own.
        """
        job_ids = set()
        for seen in batch:
            obj = seen.object
            if obj is None or seen.type == "DELETED" or seen.kind not in ("jobs", "pods"):
                continue
            if seen.kind == "pods":
                signature, may_move = pod_signature(obj), pod_may_move
            else:
                signature, may_move = job_signature(obj), job_may_move
            if may_move(signature) and self._signatures.get(obj["metadata"]["name"]) != signature:
                job_id = portal_job_id(obj)
                if job_id is not None:
                    job_ids.add(job_id)
        return job_ids

    def _relisted(self, seen: Seen) -> None:
        self.stats.relists += 1
        if seen.kind == "nodes":
            self._nodes(list(seen.items))
        elif seen.kind == "events":
            return
        elif seen.kind == "pods":
            self.pods.clear()
            for pod in seen.items:
                self._event("pods", "MODIFIED", pod)
        else:
            self._listed_jobs(list(seen.items))

    def _event(self, kind: str, type_: str, obj: Obj) -> None:
        if kind == "events":
            if type_ != "DELETED":
                explain_admitted(obj)
        elif kind == "nodes":
            self._node(obj)
        elif kind == "pods":
            self._pod(type_, obj)
        else:
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            if type_ == "DELETED":
                self.cluster_jobs.pop(key, None)
            else:
                self.cluster_jobs[key] = slim_job(obj)
            signature = job_signature(obj)
            if self._signatures.get(obj["metadata"]["name"]) == signature:
                return
            self._signatures[obj["metadata"]["name"]] = signature
            deletion = observe_job(obj, self._pods_of(obj), self.locked)
            self._delete_all([deletion] if deletion else [])
            self._dirty = True

    def _pods_of(self, job_obj: Obj) -> list[Obj]:
        """The Job's pods; asked of the API when a failure arrives before its pods' reports."""
        name = job_obj["metadata"]["name"]
        pods = list(self.pods.get(name, {}).values())
        failed = job_signature(job_obj)[1]
        if failed and not any(pod_signature(p)[2] is not None for p in pods):
            selector = f"batch.kubernetes.io/job-name={name}"
            pods = self.backend.list("pods", selector).items
        return pods

    def _pod(self, type_: str, pod: Obj) -> None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        owner, name = labels.get("batch.kubernetes.io/job-name", ""), pod["metadata"]["name"]
        if type_ == "DELETED":
            self.pods[owner].pop(name, None)
            if not self.pods[owner]:
                self.pods.pop(owner, None)
            self._signatures.pop(name, None)
            return
        self.pods[owner][name] = slim_pod(pod)
        signature = pod_signature(pod)
        if self._signatures.get(name) == signature:
            return  # nothing the portal maps has changed (heartbeats, IPs, timestamps)
        self._signatures[name] = signature
        deletion = observe_pod(pod, self.locked)
        if deletion:
            self._delete_all([deletion])
            self._dirty = True
        if signature[0] in ("Running", "Succeeded", "Failed") and name not in self._followed:
            self._followed.add(name)
            self._follow_log(pod)

    def _follow_log(self, pod: Obj) -> None:
        job_id = portal_job_id(pod)
        job = self.locked.get(job_id) if job_id else None  # locked already by the pod's report
        if job is not None:
            self.followers.follow(job, pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _node(self, obj: Obj) -> None:
        node, changed = sync_node(obj, gpu_types_by_label())
        if changed:
            self._dirty = True
            if not node.ready:
                self._delete_all(node_lost(node.name, self.locked))

    def _nodes(self, items: list[Obj]) -> None:
        for node in sync_nodes(items):
            if not node.ready:
                self._delete_all(node_lost(node.name, self.locked))
        self._dirty = True

    def _notice_submissions(self) -> None:
        """Web processes write QUEUED jobs: a new newest id, or a change among the recent ones
        (a submission that committed after a later one), means a cycle is due.

        Only recent ids are counted: counting the whole queue on every poll scanned thousands
        of rows many times a second. Older changes (a cancelled waiting job) wait for the
        periodic cycle.
        """
        top = self._queued_marker[1] if self._queued_marker else 0
        marker = Job.unscoped.filter(pk__gt=top - RECENT_IDS).aggregate(
            n=Count("id", filter=Q(state=State.QUEUED)), top=Max("id")
        )
        current = (marker["n"], marker["top"] or 0)
        if current != self._queued_marker:
            self._queued_marker = current
            self._dirty = True

    # -- deciding ------------------------------------------------------------------------------

    def cycle(self) -> None:
        started = time.perf_counter()
        self._dirty = False
        self._last["cycle"] = time.monotonic()
        now = timezone.now()
        if time.monotonic() - self._last["usage"] >= self.timing.usage_every_s:
            self._usage = past_usage(self.config, now)
            self._last["usage"] = time.monotonic()
        since = time.monotonic() - self._last["explain"]
        explain = since >= max(self.timing.explain_every_s, self._explain_gap)
        phases = self.stats.phase_seconds
        read = time.perf_counter()
        snapshot = build_snapshot(now, self._usage, self.queued, self.policy)
        decided = time.perf_counter()
        # The queue as kept between cycles (`QueuedRequests`), not sorted afresh every cycle.
        decisions = decide(snapshot, self.queued.index, self.config, explain=explain)
        phases["snapshot"] += decided - read
        phases["decide"] += time.perf_counter() - decided
        applying = time.perf_counter()
        applied = apply_decisions(decisions, now, self.explanations, holder=self.identity)
        phases["apply"] += time.perf_counter() - applying
        if explain:
            self._last["explain"] = time.monotonic()
        self._delete_all(applied.deletions)
        self.queued.left(job.pk for job in applied.admitted)
        self.queued.returned(applied.requeued)
        for job in applied.admitted:
            self._create_later(job)
        took = time.perf_counter() - started
        self._next_cycle = time.monotonic() + took * (1 / SCHEDULING_SHARE - 1)
        if explain:
            self._explain_gap = took * (1 / EXPLAIN_SHARE - 1)
            self.stats.explaining += 1
            self.stats.explaining_seconds += took
        self.stats.cycles += 1
        self.stats.admitted += len(applied.admitted)
        self.stats.cycle_seconds += took

    def _create_later(self, job: Job) -> None:
        name = job.k8s_name
        rank = (1.0, -job.total_gpus)
        self._creating[name] = future = self.kube_pool.submit(rank, self._create, job)
        # Registered before it is forgotten, even if the create has already ended.
        future.add_done_callback(lambda done: self._forget_create(name, done))

    def _forget_create(self, name: str, done: Future[None]) -> None:
        if self._creating.get(name) is done:
            del self._creating[name]

    def _create(self, job: Job) -> None:
        try:
            self.backend.create_job(job_object(job))
        except Unavailable as exc:
            log.warning("creating %s: %s (reconciliation retries)", job.k8s_name, exc)
        except Exception:
            log.exception("creating %s", job.k8s_name)

    def _delete(self, namespace: str, name: str) -> None:
        try:
            self.backend.delete_job(namespace, name)
        except Exception as exc:
            log.warning("deleting %s/%s: %s (reconciliation retries)", namespace, name, exc)
            with self._deleting_lock:
                self._deleting.discard(name)  # left to reconciliation, which deletes strays

    def _delete_after_create(self, namespace: str, name: str) -> None:
        """Delete a Job, after its create if that is still on its way: a delete that overtook
        its create (a job preempted just after its admission) would find nothing, and the Job
        created after it would run unaccounted until reconciliation found it."""
        creating = self._creating.get(name)
        if creating is not None and creating.cancel():
            return  # still waiting for a thread, now never sent: there is nothing to delete
        with self._deleting_lock:
            self._deleting.add(name)
        if creating is None:
            self.kube_pool.submit(DELETE_RANK, self._delete, namespace, name)
        else:  # called at once if the create ended meanwhile
            creating.add_done_callback(
                lambda _: self.kube_pool.submit(DELETE_RANK, self._delete, namespace, name)
            )

    def _delete_all(self, deletions: list[tuple[str, str]]) -> None:
        """Delete these Kubernetes Jobs once the transaction deciding it commits."""
        for namespace, name in deletions:
            if name:
                transaction.on_commit(partial(self._delete_after_create, namespace, name))

    def _expire_grace(self) -> None:
        due = Job.unscoped.filter(state__in=HOLDING_STATES, grace_until__lte=timezone.now())
        job_ids = list(due.values_list("id", flat=True))
        if not job_ids:
            return
        requeued = []
        with self._writing():
            self.locked.lock(job_ids)
            for job_id in job_ids:
                job = self.locked.get(job_id)
                if job is not None and job.state in HOLDING_STATES and job.grace_until is not None:
                    reason = f"preempted for job {job.preempted_for_id} after its grace period"
                    self._delete_all([stop_preempted(job, reason)])
                    requeued.append(job_id)
                    self._dirty = True
        self.queued.returned(requeued)

    def _delete_cancelled(self) -> None:
        cancelled = Job.unscoped.filter(state=State.CANCELLED).exclude(k8s_name="")
        for job in cancelled.select_related("team"):
            self._delete_all([(job.team.namespace, job.k8s_name)])
            Job.unscoped.filter(pk=job.pk).update(k8s_name="")
            self._dirty = True

    # -- reconciling ---------------------------------------------------------------------------

    def reconcile(self) -> dict[str, str]:
        """On taking the lead: nodes, namespaces, then jobs and pods as the cluster has them."""
        self.provisioner.forget()
        nodes = self.backend.list("nodes")
        with self._writing():
            self._nodes(nodes.items)
        self.provisioner.sync()
        jobs = self.backend.list("jobs", SELECTOR)
        pods = self.backend.list("pods", SELECTOR)
        self.pods.clear()
        with self._writing():
            self.locked.lock(ids_of(pods.items))
            for pod in pods.items:
                self._pod("MODIFIED", pod)
        with self._writing():
            self._listed_jobs(jobs.items)
        self._last["reconcile"] = time.monotonic()
        return {
            "nodes": nodes.resource_version,
            "jobs": jobs.resource_version,
            "pods": pods.resource_version,
            # Only what happens from now on: old events say nothing about the present.
            "events": self.backend.list("events", field_selector=WARNINGS).resource_version,
        }

    def _listed_jobs(self, items: list[Obj]) -> None:
        """A complete listing of the portal's Jobs: what the watch holds from now on."""
        self.cluster_jobs = {
            (o["metadata"]["namespace"], o["metadata"]["name"]): slim_job(o) for o in items
        }
        self._resync(items)

    def _resync(self, items: list[Obj]) -> None:
        """Reconcile, then map again every Job not mapped as it stands: catches up on reports
        a failed batch dropped (which forgot what it had mapped)."""
        self.reconcile_jobs(items)
        unmapped = [
            obj
            for obj in items
            if self._signatures.get(obj["metadata"]["name"]) != job_signature(obj)
        ]
        self.locked.lock(ids_of(unmapped))
        for obj in unmapped:
            self._event("jobs", "MODIFIED", obj)
        self._expire_recorded(items)

    def _expire_recorded(self, items: list[Obj]) -> None:
        """Finished Jobs whose outcome the portal has recorded get their TTL, once this commits.

        A Job is created without one (`cluster.manifests.job_object`): had it been deleted
        while the controller was away, its job would have looked vanished and lost its outcome.
        """
        finished = [obj for obj in items if awaits_ttl(obj)]
        self.locked.lock(ids_of(finished))
        for obj in finished:
            namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
            job_id = portal_job_id(obj)
            job = self.locked.get(job_id) if job_id is not None else None
            if job is not None and job.k8s_name == name and job.state in TERMINAL_STATES:
                transaction.on_commit(partial(self._expire_later, namespace, name))

    def _expire_later(self, namespace: str, name: str) -> None:
        self.kube_pool.submit(EXPIRE_RANK, self._expire, namespace, name)

    def _expire(self, namespace: str, name: str) -> None:
        try:
            self.backend.expire_job(namespace, name, FINISHED_TTL_S)
        except Exception as exc:  # the next reconciliation tries again
            log.warning("setting the TTL of %s/%s: %s", namespace, name, exc)

    def reconcile_jobs(self, items: list[Obj]) -> None:
        """Nothing lost, nothing twice: recreate what the database expects, delete strays.

        Runs inside a `_writing()` block: what it changes commits with the rest of the turn.
        """
        present = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in items}
        # Asked only about the jobs the cluster holds, not about every job ever run.
        held = sorted(ids_of(items))
        expected: set[tuple[str, str]] = set()
        for start in range(0, len(held), 5000):  # bounded statements (SQLite counts variables)
            known = (
                Job.unscoped.filter(pk__in=held[start : start + 5000])
                .exclude(k8s_name="")
                .exclude(state=State.CANCELLED)
                .values_list("team__slug", "k8s_name")
            )
            expected |= {(f"{settings.NAMESPACE_PREFIX}-{slug}", name) for slug, name in known}
        with self._deleting_lock:  # forget deletions done: the watch no longer reports them
            self._deleting &= {name for _, name in present} | self._creating.keys()
            deleting = set(self._deleting)
        for key in present.keys() - expected:
            if key[1] not in deleting:
                self._stray(*key)
        missing = Job.unscoped.filter(state__in=HOLDING_STATES).select_related(
            "team", "owner", "queue", "gpu_type"
        )
        absent = []
        for job in missing.iterator(chunk_size=1000):
            if (job.team.namespace, job.k8s_name) in present:
                continue
            if job.state == State.ADMITTED:  # admitted, but the create never got through
                if job.k8s_name not in self._creating:  # (or is still on its way)
                    self._create_later(job)
            else:
                absent.append(job)
        if absent and (gone := self._gone(absent)):
            self._vanished(gone)

    def _gone(self, jobs: list[Job]) -> list[int]:
        """Of these jobs missing from the watch's copy, those whose Job the API itself lacks.

        The copy can run behind the database: each watch is its own stream, and a pod's start
        (from the pods' stream) can be mapped before its Job's creation arrives on the jobs'
        stream. Running such a job again would run it twice.
        """
        gone = []
        for start in range(0, len(jobs), 100):  # a selector's length stays well bounded
            chunk = jobs[start : start + 100]
            selector = f"{SELECTOR},{LABEL_JOB} in ({','.join(str(j.pk) for j in chunk)})"
            listed = self.backend.list("jobs", selector).items
            there = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed}
            gone += [j.pk for j in chunk if (j.team.namespace, j.k8s_name) not in there]
        return gone

    def _vanished(self, job_ids: list[int]) -> None:
        """Running jobs whose Job objects are gone before their outcome was recorded: failed.

        A finished Job stays until its outcome is recorded (`_expire_recorded`), so one gone
        was deleted by someone else; it may have run to its end, or partly, and running it
        again could do its work twice. Its owner decides, and resubmits it if need be.
        """
        self.locked.lock(job_ids)
        for job_id in job_ids:
            job = self.locked.get(job_id)
            if job is not None and job.state == State.RUNNING:
                transition(job, State.FAILED, OUTCOME_UNKNOWN)
                self._dirty = True

    def _stray(self, namespace: str, name: str) -> None:
        log.warning("deleting stray Job %s/%s", namespace, name)
        self._delete_all([(namespace, name)])
        record(
            "cluster.stray_deleted",
            actor=None,
            team=None,
            target=("batch.job", f"{namespace}/{name}"),
        )
        self.stats.strays_deleted += 1
