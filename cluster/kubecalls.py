"""What the controller tells Kubernetes: creates, deletes and TTLs, on a ranked thread pool.

Calls go out once the transaction that decided them commits, so the database is never behind
the cluster; a call that fails is left to reconciliation (an admitted job's missing Job is
created again under the same name, a Job the database no longer expects is deleted).

A multi-pod job's headless Service and NetworkPolicy (`cluster.manifests.companion_objects`)
follow its Job's create, owned by the Job so that Kubernetes deletes them with it; ones that
could not be created are sent again at the next reconciliation (`retry_companions`).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from datetime import datetime
from functools import partial

from django.db import transaction

from cluster.backend import ClusterBackend, Unavailable
from cluster.manifests import (
    FINISHED_TTL_S,
    JOB_NAME_LABEL,
    LABEL_JOB,
    companion_objects,
    deadline_patch,
    job_object,
)
from cluster.pool import RankedPool
from jobs.models import Job

log = logging.getLogger(__name__)
KUBE_THREADS = 24
"""Creates and deletes in flight at once: an admitted job holds its GPUs from its admission,
so its create must not wait long behind hundreds of others (each takes about 40 ms, mostly
waiting on the API server). Within `load_api_client`'s 64 connections."""
DELETE_RANK = (0.0,)
"""Deletes go first: they free the GPUs that admitted jobs' pods wait for."""
NOTICE_RANK = (0.5,)
"""Preemption notices after deletes, before creates: a victim's checkpoint time is short."""
EXPIRE_RANK = (2.0,)
"""Setting finished Jobs' TTL waits for every delete and create: nothing waits for it."""


def create_rank(job: Job) -> tuple[float, ...]:
    """Creates after deletes, the jobs holding the most GPUs first."""
    return (1.0, -job.total_gpus)


class KubeCalls:
    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend
        self.pool = RankedPool(KUBE_THREADS, "kube")
        self._creating: dict[str, Future[None]] = {}
        """Creates sent to the pool and not yet answered, by Job name."""
        self._deleting: set[str] = set()
        """Jobs the controller is deleting (not strays), until the watch stops reporting them."""
        self._unaccompanied: dict[str, Job] = {}
        """Multi-pod jobs whose Service or NetworkPolicy could not be created, by Job name."""
        self._lock = threading.Lock()

    def create(self, job: Job) -> None:
        """Create the job's Kubernetes Job on a pool thread."""
        name = job.k8s_name
        self._creating[name] = future = self.pool.submit(create_rank(job), self._create, job)
        # Registered before it is forgotten, even if the create has already ended.
        future.add_done_callback(lambda done: self._forget_create(name, done))

    def creating(self, name: str) -> bool:
        return name in self._creating

    def delete_on_commit(self, deletions: list[tuple[str, str]]) -> None:
        """Delete these Kubernetes Jobs once the transaction deciding it commits."""
        for namespace, name in deletions:
            if name:
                transaction.on_commit(partial(self._delete_after_create, namespace, name))

    def notify_on_commit(self, notices: list[tuple[str, str, datetime | None]]) -> None:
        """Tell these Jobs' pods their preemption deadline (None: withdrawn) once committed."""
        for namespace, name, deadline in notices:
            if name:
                transaction.on_commit(
                    partial(self.pool.submit, NOTICE_RANK, self._notify, namespace, name, deadline)
                )

    def expire_on_commit(self, namespace: str, name: str) -> None:
        """Give this finished Job its TTL once the transaction recording its outcome commits."""
        transaction.on_commit(partial(self._expire_later, namespace, name))

    def deleting(self, present: set[str]) -> set[str]:
        """The Jobs being deleted, of those still `present` (the rest are done and forgotten)."""
        with self._lock:
            self._deleting &= present | self._creating.keys()
            return set(self._deleting)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)

    def _forget_create(self, name: str, done: Future[None]) -> None:
        if self._creating.get(name) is done:
            del self._creating[name]

    def retry_companions(self) -> None:
        """Send again the Services and NetworkPolicies that could not be created."""
        with self._lock:
            waiting, self._unaccompanied = self._unaccompanied, {}
        for job in waiting.values():
            self.pool.submit(create_rank(job), self._accompany, job)

    def _create(self, job: Job) -> None:
        try:
            self.backend.create_job(job_object(job))
        except Unavailable as exc:
            log.warning("creating %s: %s (reconciliation retries)", job.k8s_name, exc)
            return
        except Exception:
            log.exception("creating %s", job.k8s_name)
            return
        if job.nodes > 1:
            self._accompany(job)

    def _accompany(self, job: Job) -> None:
        """Create the job's Service and NetworkPolicy, owned by its Job (if still there)."""
        try:
            uid = self._uid_of(job)
            for obj in companion_objects(job, uid) if uid else ():
                self.backend.apply(obj)
        except Unavailable as exc:
            log.warning("accompanying %s: %s (reconciliation retries)", job.k8s_name, exc)
            with self._lock:
                self._unaccompanied[job.k8s_name] = job
        except Exception:
            log.exception("accompanying %s", job.k8s_name)

    def _uid_of(self, job: Job) -> str | None:
        """The uid of the job's Kubernetes Job, which its Service and policy name as owner."""
        for obj in self.backend.list("jobs", f"{LABEL_JOB}={job.pk}").items:
            meta = obj["metadata"]
            if (meta["namespace"], meta["name"]) == (job.team.namespace, job.k8s_name):
                return str(meta["uid"])
        return None

    def _delete(self, namespace: str, name: str) -> None:
        try:
            self.backend.delete_job(namespace, name)
        except Exception as exc:
            log.warning("deleting %s/%s: %s (reconciliation retries)", namespace, name, exc)
            with self._lock:
                self._deleting.discard(name)  # left to reconciliation, which deletes strays

    def _delete_after_create(self, namespace: str, name: str) -> None:
        """Delete a Job, after its create if that is still on its way: a delete that overtook
        its create (a job preempted just after its admission) would find nothing, and the Job
        created after it would run unaccounted until reconciliation found it."""
        creating = self._creating.get(name)
        if creating is not None and creating.cancel():
            return  # still waiting for a thread, now never sent: there is nothing to delete
        with self._lock:
            self._deleting.add(name)
        if creating is None:
            self.pool.submit(DELETE_RANK, self._delete, namespace, name)
        else:  # called at once if the create ended meanwhile
            creating.add_done_callback(
                lambda _: self.pool.submit(DELETE_RANK, self._delete, namespace, name)
            )

    def _notify(self, namespace: str, name: str, deadline: datetime | None) -> None:
        """Annotate the Job's pods (shown in their containers through the downward API). A pod
        missed here (not created yet) runs without it; its SIGTERM still comes."""
        try:
            for pod in self.backend.list("pods", f"{JOB_NAME_LABEL}={name}").items:
                meta = pod["metadata"]
                if meta["namespace"] == namespace:
                    self.backend.patch_pod(namespace, meta["name"], deadline_patch(deadline))
        except Exception as exc:
            log.warning("telling %s/%s its deadline: %s", namespace, name, exc)

    def _expire_later(self, namespace: str, name: str) -> None:
        self.pool.submit(EXPIRE_RANK, self._expire, namespace, name)

    def _expire(self, namespace: str, name: str) -> None:
        try:
            self.backend.expire_job(namespace, name, FINISHED_TTL_S)
        except Exception as exc:  # the next reconciliation tries again
            log.warning("setting the TTL of %s/%s: %s", namespace, name, exc)
