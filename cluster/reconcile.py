"""Reconciliation: nothing lost, nothing run twice (DESIGN.md section 6).

On taking the lead the controller lists nodes, Jobs and Pods and maps them; afterwards it
resyncs from the watch's copy, as an informer does (listing every Job again, an hour of finished
ones among them, cost more than all the rest of a turn). A resync recreates what the database
expects, deletes strays, fails running jobs whose Job vanished before their outcome was
recorded, gives finished Jobs whose outcome is recorded their TTL, and sends again the
multi-pod jobs' Services and NetworkPolicies that could not be created.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from django.conf import settings

from audit.record import record
from cluster.backend import ClusterBackend, Obj
from cluster.intake import Intake
from cluster.kubecalls import KubeCalls
from cluster.locked import LockedJobs
from cluster.manifests import LABEL_JOB, LABEL_MANAGED, PORTAL
from cluster.observe import awaits_ttl, ids_of, portal_job_id
from cluster.provision import Provisioner
from jobs.models import HOLDING_STATES, TERMINAL_STATES, Job, State
from jobs.states import transition

if TYPE_CHECKING:
    from cluster.controller import Stats

log = logging.getLogger(__name__)
SELECTOR = f"{LABEL_MANAGED}={PORTAL}"
WARNINGS = "type=Warning"  # the only Events the controller acts on (`explain_admitted`)
OUTCOME_UNKNOWN = (
    "outcome unknown: its Job was deleted from the cluster before the portal recorded how it "
    "ended; not run again, resubmit it if it should run"
)


class Reconciler:
    def __init__(
        self,
        backend: ClusterBackend,
        intake: Intake,
        kube: KubeCalls,
        provisioner: Provisioner,
        stats: Stats,
        writing: Callable[[], AbstractContextManager[LockedJobs]],
        changed: Callable[[], None],
    ) -> None:
        self.backend, self.intake, self.kube, self.stats = backend, intake, kube, stats
        self.provisioner = provisioner
        self.writing, self.changed = writing, changed

    def listed(self) -> dict[str, str]:
        """On taking the lead: nodes, namespaces, then Jobs and Pods as the cluster has them;
        returns the resourceVersion each watch starts from."""
        self.provisioner.forget()
        nodes = self.backend.list("nodes")
        with self.writing() as locked:
            self.intake.listed_nodes(nodes.items, locked)
        self.provisioner.sync()
        jobs = self.backend.list("jobs", SELECTOR)
        pods = self.backend.list("pods", SELECTOR)
        with self.writing() as locked:
            locked.lock(ids_of(pods.items))
            self.intake.listed_pods(pods.items, locked)
        with self.writing() as locked:
            self.intake.listed_jobs(jobs.items)
            self.resync(jobs.items, locked)
        return {
            "nodes": nodes.resource_version,
            "jobs": jobs.resource_version,
            "pods": pods.resource_version,
            # Only what happens from now on: old events say nothing about the present.
            "events": self.backend.list("events", field_selector=WARNINGS).resource_version,
        }

    def resync(self, items: list[Obj], locked: LockedJobs) -> None:
        """Reconcile with these Jobs, then map again every one not mapped as it stands: catches
        up on reports a failed batch dropped."""
        self.kube.retry_companions()
        self._reconcile_jobs(items, locked)
        unmapped = self.intake.unmapped(items)
        locked.lock(ids_of(unmapped))
        for obj in unmapped:
            self.intake.take("jobs", "MODIFIED", obj, locked)
        self._expire_recorded(items, locked)

    def _expire_recorded(self, items: list[Obj], locked: LockedJobs) -> None:
        """Finished Jobs whose outcome the portal has recorded get their TTL, once this commits.

        A Job is created without one (`cluster.manifests.job_object`): had it been deleted
        while the controller was away, its job would have looked vanished and lost its outcome.
        """
        finished = [obj for obj in items if awaits_ttl(obj)]
        locked.lock(ids_of(finished))
        for obj in finished:
            namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
            job_id = portal_job_id(obj)
            job = locked.get(job_id) if job_id is not None else None
            if job is not None and job.k8s_name == name and job.state in TERMINAL_STATES:
                self.kube.expire_on_commit(namespace, name)

    def _reconcile_jobs(self, items: list[Obj], locked: LockedJobs) -> None:
        present = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in items}
        deleting = self.kube.deleting({name for _, name in present})
        for key in present.keys() - self._expected(items):
            if key[1] not in deleting:
                self._stray(*key)
        holding = Job.unscoped.filter(state__in=HOLDING_STATES).select_related(
            "team", "owner", "queue", "gpu_type"
        )
        absent = []
        for job in holding.iterator(chunk_size=1000):
            if (job.team.namespace, job.k8s_name) in present:
                continue
            if job.state == State.ADMITTED:  # admitted, but the create never got through
                if not self.kube.creating(job.k8s_name):  # (or is still on its way)
                    self.kube.create(job)
            else:
                absent.append(job)
        if absent and (gone := self._gone(absent)):
            self._vanished(gone, locked)

    @staticmethod
    def _expected(items: list[Obj]) -> set[tuple[str, str]]:
        """Of these Jobs, (namespace, name) of those the database expects to exist; asked only
        about the jobs the cluster holds, not about every job ever run."""
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
        return expected

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

    def _vanished(self, job_ids: list[int], locked: LockedJobs) -> None:
        """Running jobs whose Job objects are gone before their outcome was recorded: failed.

        A finished Job stays until its outcome is recorded (`_expire_recorded`), so one gone
        was deleted by someone else; it may have run to its end, or partly, and running it
        again could do its work twice. Its owner decides, and resubmits it if need be.
        """
        locked.lock(job_ids)
        for job_id in job_ids:
            job = locked.get(job_id)
            if job is not None and job.state == State.RUNNING:
                transition(job, State.FAILED, OUTCOME_UNKNOWN, moves=locked.moves)
                self.changed()

    def _stray(self, namespace: str, name: str) -> None:
        log.warning("deleting stray Job %s/%s", namespace, name)
        self.kube.delete_on_commit([(namespace, name)])
        record(
            "cluster.stray_deleted",
            actor=None,
            team=None,
            target=("batch.job", f"{namespace}/{name}"),
        )
        self.stats.strays_deleted += 1
