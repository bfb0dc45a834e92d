"""One scheduling cycle: walk the queue in policy order, admit what fits, reserve for the rest.

The walk merges the heads of the per-team streams through a heap whose key is the cluster policy
(stale keys are refreshed lazily when popped, since a team's share changes as it is served). For
each job: quota, then placement now (possibly on GPUs lent from reservations that start after the
job's runtime limit), then preemption, and otherwise a reservation (up to `max_reservations` per
GPU type) so that later, smaller jobs only backfill where they do not delay it.

A job whose preemption victims have stopped goes first, until it starts; the victims, back in
the queue, do not start before it (`JobRequest.yields_to`): a preemption buys its claimant the
GPUs it freed.

Once nothing left in a stream can start or preempt this cycle, the rest of the stream is only
explained (no placement, preemption or reservation) or, with `explain` off (the simulator's cheap
cycles), skipped; so the decisions are the same either way.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import Any

from scheduler import fits, preemption
from scheduler.config import Policy, PolicyConfig
from scheduler.decisions import Admission, Preemption, Reason, ReasonCode
from scheduler.explain import capacity_reason, cordoned, fits_ignoring_holds, pods_in
from scheduler.ledger import Ledger
from scheduler.model import JobId, JobRequest, Placement, RunningJob, Snapshot
from scheduler.placement import find_placement
from scheduler.pool import NodePool
from scheduler.queue import QueueIndex, Stream
from scheduler.sweep import Sweep


class Cycle:
    def __init__(
        self, snapshot: Snapshot, queue: QueueIndex, config: PolicyConfig, explain: bool
    ) -> None:
        self.snapshot, self.queue, self.config, self.explain = snapshot, queue, config, explain
        self.now = snapshot.now
        self.pools, self.unschedulable = _pools(snapshot, config)
        capacity = {gpu_type: sum(pool.total.values()) for gpu_type, pool in self.pools.items()}
        self.ledger = Ledger(snapshot, config, capacity)
        self.start_counts = {t: pool.bucket_counts() for t, pool in self.pools.items()}
        self.start_pods: dict[tuple[str, int], int] = {}
        self.running: dict[str, list[RunningJob]] = {}
        self.claims: dict[JobId, list[RunningJob]] = {}
        for running in sorted(snapshot.running, key=lambda r: r.job.id):
            self.running.setdefault(running.job.gpu_type, []).append(running)
            if running.grace_until is not None and running.preempted_for is not None:
                self.claims.setdefault(running.preempted_for, []).append(running)
        by_id = queue.by_id
        self.first = {claimant for claimant in queue.yielded_to if claimant in by_id}
        """Jobs whose victims have stopped: they go first, so the GPUs the preemption freed are
        theirs (else a job ahead of them in policy order could take them, and the preemption
        would have bought nothing), until they start."""
        self.first_streams = {(by_id[c].team, by_id[c].gpu_type) for c in self.first}
        self.admitted: dict[str, list[tuple[float, JobId, Placement]]] = {}
        self.stopped: dict[JobId, float] = {}
        self.started: list[RunningJob] = []
        self.started_ids: set[JobId] = set()
        self.sweeps: dict[str, Sweep] = {}
        self.reserved: dict[JobId, tuple[float, Placement]] = {}
        self.reservations: dict[str, int] = {}
        self.ahead: dict[str, int] = {}
        self.victims: dict[str, list[RunningJob]] = {}
        self.lowest_preemptible: dict[tuple[str, str], int] = {}
        self.misfits: dict[tuple[str, int, int], tuple[int, float]] = {}
        self.single_misfit: dict[str, tuple[int, int, float]] = {}
        self.held_fits: dict[tuple[str, int, int], tuple[int, bool]] = {}
        self.refused: dict[tuple[str, str, int, int], tuple[int, float, float]] = {}
        """(team, type, nodes, gpus_per_node) -> (pool gains, end, latest hold) of a refusal."""
        self.preempt_failed: dict[tuple[str, str], int] = {}
        self.shapes = fits.shapes(snapshot.nodes)
        self.never: dict[tuple[Any, ...], Reason | None] = {}
        self.hopeless: set[JobId] = set()
        """Jobs that cannot start as things are (`scheduler.fits`, a held team): never tried."""
        self.visited: list[JobRequest] = []
        """Jobs left waiting, in the order the policy took them (estimates follow it)."""
        self.visit_keys: list[tuple[Any, ...]] = []
        self.key: tuple[Any, ...] = ()
        self.deferred: list[tuple[tuple[Any, ...], JobRequest]] = []
        self.reasons: dict[JobId, Reason] = {}
        self.admissions: list[Admission] = []
        self.preemptions: list[Preemption] = []

    # -- the walk ---------------------------------------------------------------------------

    def run(self) -> None:
        cutoff = None
        if self.config.starvation_after_s is not None:
            cutoff = self.now - self.config.starvation_after_s
        streams = self.queue.sorted_streams()
        orders = [self._in_order(stream, cutoff) for stream in streams]
        positions = [0] * len(streams)
        version = self.ledger.version
        heap = [(self._key(o[0], cutoff), i, version(o[0].team)) for i, o in enumerate(orders)]
        heapq.heapify(heap)
        while heap:
            key, i, seen = heapq.heappop(heap)
            order, position = orders[i], positions[i]
            job = order[position]
            if seen != version(job.team):
                fresh = self._key(job, cutoff)
                if fresh != key:
                    heapq.heappush(heap, (fresh, i, version(job.team)))
                    continue
            self.key = key
            if self._stalled(job):
                position = self._skip_stalled(order, position, cutoff)
                positions[i] = position
                if position < len(order):
                    following = order[position]
                    heapq.heappush(heap, (self._key(following, cutoff), i, version(following.team)))
                continue
            positions[i] = position + 1
            if not self._consider(job) and self._exhausted(streams[i]):
                if self.explain:
                    self.deferred.extend((self._key(j, cutoff), j) for j in order[position + 1 :])
                continue
            if position + 1 < len(order):
                following = order[position + 1]
                heapq.heappush(heap, (self._key(following, cutoff), i, version(following.team)))
        if self.deferred:
            self._explain_deferred()

    def _skip_stalled(self, order: list[JobRequest], position: int, cutoff: float | None) -> int:
        """Pass over the run of stalled jobs from `position`; returns the next one to try."""
        while position < len(order) and self._stalled(order[position]):
            if self.explain:
                self.deferred.append((self._key(order[position], cutoff), order[position]))
            position += 1
        return position

    def _explain_deferred(self) -> None:
        """Explain the rest of exhausted streams, merged into the visit order by policy key.

        Nothing about them can change this cycle, so their keys are fixed and one sort replaces
        a heap step per job; the order only matters to the estimates, which run in it.
        """
        deferred = sorted(self.deferred)  # keys end with the job id: no ties
        visited, keys = self.visited, self.visit_keys
        self.visited, self.visit_keys, self.ahead = [], [], {}
        index = 0
        for key, job in deferred:
            while index < len(visited) and keys[index] <= key:
                self._revisit(visited[index], keys[index])
                index += 1
            self.key = key
            self._explain_only(job)
        for position in range(index, len(visited)):
            self._revisit(visited[position], keys[position])

    def _revisit(self, job: JobRequest, key: tuple[Any, ...]) -> None:
        if job.id not in self.hopeless:
            self.ahead[job.gpu_type] = self.ahead.get(job.gpu_type, 0) + 1
        self.visited.append(job)
        self.visit_keys.append(key)

    def _in_order(self, stream: Stream, cutoff: float | None) -> list[JobRequest]:
        """The stream's order this cycle: its claimants first (see `first`), then aged jobs."""
        order = stream.in_order(cutoff)
        if stream.key not in self.first_streams:
            return order
        return [j for j in order if j.id in self.first] + [
            j for j in order if j.id not in self.first
        ]

    def _key(self, head: JobRequest, cutoff: float | None) -> tuple[Any, ...]:
        aged = 0 if cutoff is not None and head.submit_time <= cutoff else 1
        if self.first and head.id in self.first:
            aged = -1
        job_order = (-head.priority, head.submit_time, head.id)
        policy = self.config.policy
        if policy is Policy.FAIR:
            return (aged, self.ledger.share(head.team), *job_order)
        if policy is Policy.CAPACITY:
            return (aged, 0 if self.ledger.within_guarantee(head) else 1, *job_order)
        return (aged, *job_order)

    def _exhausted(self, stream: Stream) -> bool:
        """Can nothing left in the stream start or preempt this cycle? (conservative)"""
        team, gpu_type = stream.key
        pool = self.pools.get(gpu_type)
        if pool is None or team in self.snapshot.holds:
            return True
        if self._may_preempt(team, gpu_type, int(stream.gpus.min()), stream.jobs[0].priority):
            return False
        used = self.ledger.used.get(stream.key, 0)
        if used + stream.gpus.min() > self.ledger.limit(team, gpu_type):
            return True
        known = self.single_misfit.get(gpu_type)
        if (
            known is not None
            and known[0] == pool.version
            and known[1] <= stream.gpus_per_node.min()
            and known[2] <= self.now + stream.runtime_limit.min()
        ):
            return True
        if pool.largest_free() >= stream.gpus_per_node.min():
            return False
        return pool.lendable_total(self.now + stream.runtime_limit.min()) < stream.gpus.min()

    # -- one job ----------------------------------------------------------------------------

    def _hopeless(self, job: JobRequest) -> bool:
        """Can `job` not start as things are (a held team, or `scheduler.fits`)? Then it waits
        with that reason, takes nothing, and is ahead of no one."""
        held = self.snapshot.holds.get(job.team)
        if held is not None:
            reason: Reason | None = Reason(ReasonCode.BUDGET_EXHAUSTED, held)
        else:
            reason = self._never_fits(job)
        if reason is None:
            return False
        self.hopeless.add(job.id)
        self._wait(job, reason)
        return True

    def _never_fits(self, job: JobRequest) -> Reason | None:
        """`fits.never_fits`, remembered per team, type and shape for the cycle (the member
        matters only where the member has a cap)."""
        key: tuple[Any, ...] = (job.team, job.gpu_type, job.nodes, job.gpus_per_node)
        if self.ledger.cap(job.team, job.member) is not None:
            key += (job.member,)
        if key not in self.never:
            self.never[key] = fits.never_fits(job, self.ledger, self.config, self.shapes)
        return self.never[key]

    def _consider(self, job: JobRequest) -> bool:
        gpu_type = job.gpu_type
        if self._hopeless(job):  # not ahead of anyone: it takes nothing
            return False
        if job.yields_to is not None and self._yields(job, job.yields_to):
            return False
        self.ahead[gpu_type] = self.ahead.get(gpu_type, 0) + 1
        pool = self.pools.get(gpu_type)
        if pool is None:
            self._wait(job, cordoned(job, self.unschedulable.get(gpu_type, 0)))
            return False
        quota = self.ledger.check(job)
        if job.id in self.claims:
            return self._claimant(job, pool, quota)
        if quota is None:
            placement = self._place_now(job, pool)
            if placement is not None:
                self._admit(job, pool, placement)
                return True
        outcome = self._preempt(job, pool, quota)
        if outcome is True:
            return True
        if quota is None:
            end = self.now + job.runtime_limit_s
            shape = (job.team, gpu_type, job.nodes, job.gpus_per_node)
            self.refused[shape] = (pool.gains, end, pool.latest_hold)
        if isinstance(outcome, Reason):
            self._wait(job, outcome)
        elif quota is not None:
            self._wait(job, quota)
        else:
            self._wait(job, self._block(job, pool))
        return False

    def _yields(self, job: JobRequest, claimant_id: JobId) -> bool:
        """Was `job` preempted for a job that still waits, and could start? Then it waits for
        that job, ahead of no one: else it would take back the GPUs it was stopped to free, and
        be stopped again for the same job (a preemption that bought nothing)."""
        claimant = self.queue.by_id.get(claimant_id)
        if claimant is None or claimant.id in self.started_ids:
            return False
        if claimant.team in self.snapshot.holds or self._never_fits(claimant) is not None:
            return False
        self._wait(job, Reason(ReasonCode.YIELDING, {"for_job": claimant.id}))
        return True

    def _stalled(self, job: JobRequest) -> bool:
        """Was a job of the same team and shape, running no longer, refused since GPUs last
        came back? Then this one is not tried either (no placement, preemption or reservation):
        one attempt per team, GPU type and shape keeps cycles linear in the queue length.
        """
        pool = self.pools.get(job.gpu_type)
        if pool is None:
            return False
        shape = (job.team, job.gpu_type, job.nodes, job.gpus_per_node)
        refused = self.refused.get(shape)
        if refused is None or refused[0] != pool.gains:
            return False
        # Running at least as long, or past every reservation's start (so no held GPU could be
        # lent to it either), it has no more room than the refused job had.
        end = self.now + job.runtime_limit_s
        return end >= refused[1] or end > refused[2]

    def _explain_only(self, job: JobRequest) -> None:
        """A job of a stream where nothing can start: its reason, with no side effects."""
        if self._hopeless(job):
            return
        if job.yields_to is not None and self._yields(job, job.yields_to):
            return
        self.ahead[job.gpu_type] = self.ahead.get(job.gpu_type, 0) + 1
        pool = self.pools.get(job.gpu_type)
        if pool is None:
            self._wait(job, cordoned(job, self.unschedulable.get(job.gpu_type, 0)))
            return
        if job.id in self.claims:
            self._wait(job, self._preempting(job))
        else:
            self._wait(job, self.ledger.check(job) or self._capacity_reason(job, pool))

    def _wait(self, job: JobRequest, reason: Reason) -> None:
        if self.explain:
            self.visited.append(job)
            self.visit_keys.append(self.key)
            self.reasons[job.id] = reason

    def _place_now(self, job: JobRequest, pool: NodePool) -> Placement | None:
        # A shape that did not fit still does not, until the pool changes; nor does it fit on
        # lent GPUs for a longer runtime limit (fewer holds start after a later end).
        shape = (job.gpu_type, job.nodes, job.gpus_per_node)
        end = self.now + job.runtime_limit_s
        failed = self.misfits.get(shape)
        if failed is not None and failed[0] == pool.version and failed[1] <= end:
            return None
        placement = self._try_place(job, pool, end)
        if placement is None:
            self.misfits[shape] = (pool.version, end)
            if job.nodes == 1:
                self._note_single_misfit(job.gpu_type, pool.version, job.gpus, end)
        return placement

    def _note_single_misfit(self, gpu_type: str, version: int, gpus: int, end: float) -> None:
        """Remember the smallest single-node request that fits nowhere (then, neither does any
        job needing that many GPUs on one node and running at least as long)."""
        known = self.single_misfit.get(gpu_type)
        if known is None or known[0] != version or (gpus <= known[1] and end <= known[2]):
            self.single_misfit[gpu_type] = (version, gpus, end)

    def _try_place(self, job: JobRequest, pool: NodePool, end: float) -> Placement | None:
        if pool.pods(job.gpus_per_node) >= job.nodes:
            placement = find_placement(pool, job.nodes, job.gpus_per_node)
            if placement is not None:
                return placement
        if not pool.held_total or end > pool.latest_hold:
            return None
        lendable = pool.lendable(end)
        if not lendable:
            return None
        return find_placement(pool, job.nodes, job.gpus_per_node, lendable)

    def _admit(self, job: JobRequest, pool: NodePool, placement: Placement) -> None:
        end = self.now + job.runtime_limit_s
        pool.take_with_holds(placement, end)
        self.ledger.add(job)
        self.admissions.append(Admission(job.id, placement))
        self.admitted.setdefault(job.gpu_type, []).append((end, job.id, placement))
        self.started.append(RunningJob(job, self.now, placement))
        self.started_ids.add(job.id)
        sweep = self.sweeps.get(job.gpu_type)
        if sweep is not None:
            sweep.occupy(job.id, placement, end)

    def _claimant(self, job: JobRequest, pool: NodePool, quota: Reason | None) -> bool:
        """A job whose victims are still stopping: start if it can, else wait for them."""
        placement = self._place_now(job, pool) if quota is None else None
        if placement is not None:
            self._admit(job, pool, placement)
            return True
        self.ledger.add(job)  # its victims' GPUs are spoken for
        self._reserve(job, pool)
        self._wait(job, self._preempting(job))
        return False

    def _preempting(self, job: JobRequest) -> Reason:
        victims = self.claims[job.id]
        wait = max(r.grace_until or self.now for r in victims) - self.now
        return Reason(ReasonCode.PREEMPTING, {"victims": len(victims), "wait_s": round(wait)})

    def _block(self, job: JobRequest, pool: NodePool) -> Reason:
        reason = self._capacity_reason(job, pool)
        if self.reservations.get(job.gpu_type, 0) < self.config.max_reservations:
            self._reserve(job, pool)
        return reason

    def _capacity_reason(self, job: JobRequest, pool: NodePool) -> Reason:
        if not self.explain:
            return _UNEXPLAINED
        key = (job.gpu_type, job.gpus_per_node)
        start_pods = self.start_pods.get(key)
        if start_pods is None:
            start_pods = pods_in(self.start_counts[job.gpu_type], job.gpus_per_node)
            self.start_pods[key] = start_pods
        shape = (job.gpu_type, job.nodes, job.gpus_per_node)
        known = self.held_fits.get(shape)
        if known is None or known[0] != pool.version:
            known = self.held_fits[shape] = (pool.version, fits_ignoring_holds(job, pool))
        ahead = self.ahead[job.gpu_type] - 1
        return capacity_reason(job, pool, start_pods, ahead, self.now, known[1])

    def _reserve(
        self, job: JobRequest, pool: NodePool, found: tuple[float, Placement] | None = None
    ) -> None:
        sweep = self._sweep(job.gpu_type)
        found = found or sweep.find(job.nodes, job.gpus_per_node)
        if found is None:
            return
        start, placement = found
        sweep.occupy(job.id, placement, start + job.runtime_limit_s)
        pool.hold(job.id, placement, start)
        self.reserved[job.id] = found
        self.reservations[job.gpu_type] = self.reservations.get(job.gpu_type, 0) + 1

    def _sweep(self, gpu_type: str) -> Sweep:
        sweep = self.sweeps.get(gpu_type)
        if sweep is None:
            ends = self.ends(gpu_type, RunningJob.end_by_limit)
            sweep = self.sweeps[gpu_type] = Sweep(self.pools[gpu_type], self.now, ends)
        return sweep

    def ends(self, gpu_type: str, end_of: Any) -> list[tuple[float, JobId, Placement]]:
        """Expected ends of the GPUs of a type: running, stopping and admitted this cycle."""
        pool = self.pools[gpu_type]
        ends = []
        for running in self.running.get(gpu_type, ()):
            end = min(end_of(running), self.stopped.get(running.job.id, float("inf")))
            placement = tuple((n, g) for n, g in running.placement if n in pool.free)
            ends.append((end, running.job.id, placement))
        return ends + self.admitted.get(gpu_type, [])

    def released(self) -> list[JobId]:
        """Victims no longer needed: their claimant is not in the queue any more, or started
        this cycle on GPUs that were free (a claimant placed now never uses stopping GPUs)."""
        if not self.claims:
            return []
        waiting, started = self.queue.by_id, self.started_ids
        return sorted(
            victim.job.id
            for claimant, victims in self.claims.items()
            if claimant not in waiting or claimant in started or claimant in self.hopeless
            for victim in victims
        )

    def holdings(self) -> list[RunningJob]:
        """Every job holding GPUs after this cycle, victims with their new stop time."""
        held = [
            replace(r, grace_until=self.stopped[r.job.id]) if r.job.id in self.stopped else r
            for r in self.snapshot.running
        ]
        return held + self.started

    # -- preemption -------------------------------------------------------------------------

    def _may_preempt(self, team: str, gpu_type: str, gpus: int, priority: int) -> bool:
        if self.preempt_failed.get((team, gpu_type), 1 << 30) <= gpus:
            return False
        ranked = self._victims(gpu_type)
        if not ranked:
            return False
        used = self.ledger.used.get((team, gpu_type), 0)
        if self.config.reclaim and used + gpus <= self.ledger.guaranteed(team, gpu_type):
            return True
        lowest = self.lowest_preemptible.get((team, gpu_type))
        return self.config.priority_preemption and lowest is not None and lowest < priority

    def _victims(self, gpu_type: str) -> list[RunningJob]:
        """Running jobs that could be preempted: not stopping yet, not expected to end within
        the grace period, not stopped `max_preemptions` times already, and not aged (requeued,
        an aged job would go first and take its GPUs back: a livelock)."""
        ranked = self.victims.get(gpu_type)
        if ranked is None:
            horizon = self.now + self.config.preemption_grace_s
            aged = self.config.starvation_after_s
            young_after = float("-inf") if aged is None else self.now - aged
            bound = self.config.max_preemptions
            ranked = [
                r
                for r in self.running.get(gpu_type, ())
                if r.grace_until is None
                and r.end_expected(self.now) > horizon
                and r.job.submit_time > young_after
                and r.job.restarts < bound
            ]
            ranked.sort(key=lambda r: preemption.victim_order(r, self.now))
            self._rank(gpu_type, ranked)
        return ranked

    def _rank(self, gpu_type: str, ranked: list[RunningJob]) -> None:
        self.victims[gpu_type] = ranked
        for running in ranked:
            if running.job.preemptible:
                key = (running.job.team, gpu_type)
                lowest = self.lowest_preemptible.get(key, running.job.priority)
                self.lowest_preemptible[key] = min(lowest, running.job.priority)

    def _preempt(self, job: JobRequest, pool: NodePool, quota: Reason | None) -> Reason | bool:
        """Preempt for `job` if that is allowed and quicker than waiting: True if admitted now."""
        if quota is not None and quota.code is not ReasonCode.QUOTA_EXHAUSTED:
            return False
        if not self._may_preempt(job.team, job.gpu_type, job.gpus, job.priority):
            return False
        if quota is None:
            found = self._sweep(job.gpu_type).find(job.nodes, job.gpus_per_node)
            if found is not None and found[0] <= self.now + self.config.preemption_grace_s:
                return False  # waiting is as quick as a preemption; _block may reserve
        offered = preemption.candidates(
            job,
            self._victims(job.gpu_type),
            self.ledger,
            self.config.reclaim,
            self.config.priority_preemption,
        )
        victims = preemption.choose(job, offered, pool, self.ledger)
        if victims is None:
            self.preempt_failed[(job.team, job.gpu_type)] = job.gpus
            return False
        return self._stop(job, pool, victims)

    def _stop(
        self, job: JobRequest, pool: NodePool, victims: list[preemption.Victim]
    ) -> Reason | bool:
        until = self.now + self.config.preemption_grace_s
        sweep = self._sweep(job.gpu_type)
        extra = preemption.freed(victims, pool)
        for victim in victims:
            running = victim.running
            self.preemptions.append(Preemption(running.job.id, victim.reason, job.id, until))
            if self.config.preemption_grace_s <= 0:
                self.ledger.remove(running.job)
            else:
                self.ledger.leave(running.job)
            self.stopped[running.job.id] = until
            sweep.shorten(running.job.id, running.placement, until)
        left = [r for r in self.victims[job.gpu_type] if r.job.id not in self.stopped]
        self.lowest_preemptible = {
            key: value for key, value in self.lowest_preemptible.items() if key[1] != job.gpu_type
        }
        self._rank(job.gpu_type, left)
        if self.config.preemption_grace_s <= 0:
            pool.give(tuple(sorted(extra.items())))
            placement = find_placement(pool, job.nodes, job.gpus_per_node)
            assert placement is not None, "victims were chosen so that the job fits"
            self._admit(job, pool, placement)
            return True
        self.ledger.add(job)
        placement = find_placement(pool, job.nodes, job.gpus_per_node, extra)
        if placement is not None:
            self._reserve(job, pool, (until, placement))
        figures = {"victims": len(victims), "wait_s": round(self.config.preemption_grace_s)}
        return Reason(ReasonCode.PREEMPTING, figures)


_UNEXPLAINED = Reason(ReasonCode.NO_CAPACITY)
"""Stands in for a capacity reason when the cycle does not explain (never returned)."""


def _pools(snapshot: Snapshot, config: PolicyConfig) -> tuple[dict[str, NodePool], dict[str, int]]:
    by_type: dict[str, list[Any]] = {}
    unschedulable: dict[str, int] = {}
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        if node.schedulable:
            by_type.setdefault(node.gpu_type, []).append(node)
        else:
            unschedulable[node.gpu_type] = unschedulable.get(node.gpu_type, 0) + 1
    pools = {t: NodePool.from_nodes(nodes, config.topology_keys) for t, nodes in by_type.items()}
    return pools, unschedulable


def run_cycle(snapshot: Snapshot, queue: QueueIndex, config: PolicyConfig, explain: bool) -> Cycle:
    cycle = Cycle(snapshot, queue, config, explain)
    cycle.run()
    return cycle
