"""Taking in what the watches report: the watch's copy of the cluster, mapped onto job states.

Reports are applied in batches, one transaction each (`writing`): at hundreds of reports a
second the round trips, not the work, were the cost. A batch that fails is applied not at all,
and the next resync maps again every Job whose state was not mapped (`unmapped`).
"""

from __future__ import annotations

import queue
from collections import defaultdict
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from django.db import DatabaseError

from cluster.backend import ClusterBackend, Obj
from cluster.inventory import gpu_types_by_label, sync_node, sync_nodes
from cluster.kubecalls import KubeCalls
from cluster.locked import LockedJobs
from cluster.logs import LogFollowers
from cluster.observe import (
    explain_admitted,
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
)
from cluster.watchers import Seen

if TYPE_CHECKING:
    from cluster.controller import Stats

MAX_BATCH = 2000
"""Watch reports applied in one transaction at most, so one batch never outlasts the lease."""
JOB_NAME = "batch.kubernetes.io/job-name"


class Intake:
    """The watch's copy of the portal's Jobs and Pods, and what of them was mapped.

    Staleness: `cluster_jobs` and `pods` are as the watch streams last reported, behind the
    API by the reports still queued (taken in every turn) and each stream's own lag; that is
    safe because a Job missing from the copy is asked of the API before its job is failed
    (`cluster.reconcile`), a create repeated is a 409 under the same name, and a delete
    repeated a 404. `signatures` never hides a change: a report whose state differs from the
    one remembered is always mapped, and what a failed batch remembered is forgotten.
    """

    def __init__(
        self,
        backend: ClusterBackend,
        kube: KubeCalls,
        followers: LogFollowers,
        stats: Stats,
        writing: Callable[[], AbstractContextManager[LockedJobs]],
        changed: Callable[[], None],
        jobs_listed: Callable[[list[Obj], LockedJobs], None],
    ) -> None:
        self.backend, self.kube, self.followers, self.stats = backend, kube, followers, stats
        self.writing, self.changed, self.jobs_listed = writing, changed, jobs_listed
        self.seen: queue.Queue[Seen] = queue.Queue()
        self.pods: dict[str, dict[str, Obj]] = defaultdict(dict)
        """The portal's Pods as the watch last reported them, by Job name, then Pod name."""
        self.cluster_jobs: dict[tuple[str, str], Obj] = {}
        """The portal's Jobs as the watch last reported them, by (namespace, name)."""
        self.signatures: dict[str, tuple[object, ...]] = {}
        """What was last mapped per object, so repeated reports of the same state cost nothing."""
        self._followed: set[str] = set()

    def forget(self) -> None:
        """A new leader maps everything afresh and follows every running pod's log again."""
        self.signatures.clear()
        self._followed.clear()

    def catch_up(self) -> None:
        """Take in what piled up while the loop was busy, before a cycle reads its snapshot:
        a job that ended must not still look like it holds its GPUs."""
        if not self.seen.empty():
            self.drain(0.0)

    def drain(self, wait_s: float) -> None:
        """Apply the waiting reports (waiting up to `wait_s` for the first) in one batch."""
        try:
            batch = [self.seen.get(timeout=wait_s)]
        except queue.Empty:
            return
        while len(batch) < MAX_BATCH:
            try:
                batch.append(self.seen.get_nowait())
            except queue.Empty:
                break
        try:
            with self.writing() as locked:
                locked.lock(self.moving(batch))
                for seen in batch:
                    self.stats.counts[f"{seen.kind}.{seen.type}"] += 1
                    if seen.type == "RELIST":
                        self._relisted(seen, locked)
                    elif seen.object is not None:
                        self.take(seen.kind, seen.type, seen.object, locked)
        except DatabaseError:
            self.signatures.clear()
            raise

    def moving(self, batch: list[Seen]) -> set[int]:
        """The portal jobs this batch's reports may move, to lock together in one query: most
        reports (a pod created or scheduled, the same state again) move nothing."""
        job_ids = set()
        for seen in batch:
            obj = seen.object
            if obj is None or seen.type == "DELETED" or seen.kind not in ("jobs", "pods"):
                continue
            if seen.kind == "pods":
                signature, may_move = pod_signature(obj), pod_may_move
            else:
                signature, may_move = job_signature(obj), job_may_move
            if may_move(signature) and self.signatures.get(obj["metadata"]["name"]) != signature:
                job_id = portal_job_id(obj)
                if job_id is not None:
                    job_ids.add(job_id)
        return job_ids

    def unmapped(self, items: list[Obj]) -> list[Obj]:
        """Of these Jobs, those whose state as listed was not mapped onto their jobs."""
        return [o for o in items if self.signatures.get(o["metadata"]["name"]) != job_signature(o)]

    def listed_jobs(self, items: list[Obj]) -> None:
        """A complete listing of the portal's Jobs: what the copy holds from now on."""
        self.cluster_jobs = {
            (o["metadata"]["namespace"], o["metadata"]["name"]): slim_job(o) for o in items
        }

    def listed_pods(self, items: list[Obj], locked: LockedJobs) -> None:
        self.pods.clear()
        for pod in items:
            self.take("pods", "MODIFIED", pod, locked)

    def listed_nodes(self, items: list[Obj], locked: LockedJobs) -> None:
        for node in sync_nodes(items):
            if not node.ready:
                self.kube.delete_on_commit(node_lost(node.name, locked))
        self.changed()

    def take(self, kind: str, type_: str, obj: Obj, locked: LockedJobs) -> None:
        """Map one report onto the portal's records."""
        if kind == "events":
            if type_ != "DELETED":
                explain_admitted(obj)
        elif kind == "nodes":
            self._node(obj, locked)
        elif kind == "pods":
            self._pod(type_, obj, locked)
        else:
            self._job(type_, obj, locked)

    def _relisted(self, seen: Seen, locked: LockedJobs) -> None:
        self.stats.relists += 1
        if seen.kind == "nodes":
            self.listed_nodes(list(seen.items), locked)
        elif seen.kind == "pods":
            self.listed_pods(list(seen.items), locked)
        elif seen.kind == "jobs":
            self.listed_jobs(list(seen.items))
            self.jobs_listed(list(seen.items), locked)

    def _job(self, type_: str, obj: Obj, locked: LockedJobs) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if type_ == "DELETED":
            self.cluster_jobs.pop(key, None)
        else:
            self.cluster_jobs[key] = slim_job(obj)
        signature = job_signature(obj)
        if self.signatures.get(key[1]) == signature:
            return
        self.signatures[key[1]] = signature
        deletion = observe_job(obj, self._pods_of(obj), locked)
        self.kube.delete_on_commit([deletion] if deletion else [])
        self.changed()

    def _pods_of(self, job_obj: Obj) -> list[Obj]:
        """The Job's pods; asked of the API when a failure arrives before its pods' reports."""
        name = job_obj["metadata"]["name"]
        pods = list(self.pods.get(name, {}).values())
        failed = job_signature(job_obj)[1]
        if failed and not any(pod_signature(p)[2] is not None for p in pods):
            pods = self.backend.list("pods", f"{JOB_NAME}={name}").items
        return pods

    def _pod(self, type_: str, pod: Obj, locked: LockedJobs) -> None:
        owner = ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_NAME, "")
        name = pod["metadata"]["name"]
        if type_ == "DELETED":
            self.pods[owner].pop(name, None)
            if not self.pods[owner]:
                self.pods.pop(owner, None)
            self.signatures.pop(name, None)
            return
        self.pods[owner][name] = slim_pod(pod)
        signature = pod_signature(pod)
        if self.signatures.get(name) == signature:
            return  # nothing the portal maps has changed (heartbeats, IPs, timestamps)
        self.signatures[name] = signature
        deletion = observe_pod(pod, locked)
        if deletion:
            self.kube.delete_on_commit([deletion])
            self.changed()
        if signature[0] in ("Running", "Succeeded", "Failed") and name not in self._followed:
            self._followed.add(name)
            self._follow_log(pod, locked)

    def _follow_log(self, pod: Obj, locked: LockedJobs) -> None:
        job_id = portal_job_id(pod)
        job = locked.get(job_id) if job_id else None  # locked already by the pod's report
        if job is not None:
            self.followers.follow(job, pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _node(self, obj: Obj, locked: LockedJobs) -> None:
        node, changed = sync_node(obj, gpu_types_by_label())
        if changed:
            self.changed()
            if not node.ready:
                self.kube.delete_on_commit(node_lost(node.name, locked))
