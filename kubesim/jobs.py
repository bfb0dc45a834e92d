"""The Job controller: creates pods for batch/v1 Jobs and tracks them to Complete or Failed.

Covers parallelism, completions, Indexed completion, suspend, backoffLimit (with the real
exponential back-off between failed pods), activeDeadlineSeconds and ttlSecondsAfterFinished.
A terminating pod counts as failed and is replaced at once (podReplacementPolicy
TerminatingOrFailed, the default without a podFailurePolicy). Terminal pods are counted once,
in memory, standing in for the real controller's pod finalizers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubesim.api import Api
from kubesim.clock import parse_rfc3339, rfc3339
from kubesim.errors import ApiError
from kubesim.events import EventRecorder
from kubesim.meta import controller_uid, owner_ref, set_condition
from kubesim.resources import JOB, POD
from kubesim.store import Stored, json_copy
from kubesim.timers import Timers

Obj = dict[str, Any]
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
COMPONENT = "job-controller"


@dataclass
class Tally:
    """Terminal pods of one job already counted (uid -> index or -1)."""

    succeeded: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    last_failure: float = 0.0
    retry_at: float = 0.0
    timers: set[str] = field(default_factory=set)


def _finished(job: Obj) -> bool:
    return any(
        c["type"] in ("Complete", "Failed") and c["status"] == "True"
        for c in job.get("status", {}).get("conditions") or []
    )


def _index_of(pod: Obj) -> int:
    return int((pod["metadata"].get("annotations") or {}).get(INDEX_KEY, -1))


def _ranges(indexes: set[int]) -> str:
    """Compress {0, 1, 2, 5} to "0-2,5", as status.completedIndexes is written."""
    runs: list[list[int]] = []
    for i in sorted(indexes):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


class JobController:
    """Reconciles dirty jobs from the simulation's tick."""

    def __init__(self, api: Api, events: EventRecorder, timers: Timers) -> None:
        self.api = api
        self.events = events
        self.timers = timers
        self.dirty: set[tuple[str, str]] = set()
        self.tallies: dict[str, Tally] = {}
        self.names: dict[str, str] = {}  # job uid -> name
        self.reconciling: tuple[str, str] | None = None
        api.store.listeners.append(self.on_change)

    def on_change(self, resource: str, type_: str, new: Stored, old: Stored | None) -> None:
        if resource == JOB.key:
            uid = new.obj["metadata"]["uid"]
            if type_ == "DELETED":
                self.tallies.pop(uid, None)
                self.names.pop(uid, None)
            else:
                self.names[uid] = new.name
                self._changed((new.namespace, new.name), own=type_ == "MODIFIED")
        elif resource == POD.key:
            owner = controller_uid(new.obj)
            if owner in self.names:
                self._changed((new.namespace, self.names[owner]), own=type_ == "ADDED")

    def _changed(self, key: tuple[str, str], own: bool) -> None:
        """Mark a job for reconciling, unless this is its reconcile's own echo: the status it
        wrote, or a pod it created and counted already."""
        if not (own and key == self.reconciling):
            self.dirty.add(key)

    def run(self) -> None:
        while self.dirty:
            namespace, name = self.dirty.pop()
            stored = self.api.store.get(JOB.key, namespace, name)
            if stored is not None and not stored.obj["metadata"].get("deletionTimestamp"):
                self.reconciling = (namespace, name)
                try:
                    self.reconcile(stored)
                finally:
                    self.reconciling = None

    def _pods(self, job: Obj) -> list[Obj]:
        uid = job["metadata"]["uid"]
        found = []
        for resource, namespace, name in self.api.store.dependents_of(uid):
            stored = self.api.store.get(resource, namespace, name) if resource == POD.key else None
            if stored is not None and controller_uid(stored.obj) == uid:
                found.append(stored.obj)
        return found

    def reconcile(self, stored: Stored) -> None:
        job, now = stored.thaw("status"), self.api.clock.now()
        if _finished(job):
            self._schedule_ttl(job)
            return
        uid, spec, status = job["metadata"]["uid"], job["spec"], job["status"]
        tally = self.tallies.setdefault(uid, Tally())
        pods = self._pods(job)
        active = self._count(pods, tally, now)
        self._write_counts(status, pods, active, tally)
        if spec.get("suspend"):
            self._suspend(job, active, now)
        else:
            self._resume(job, now)
            outcome = self._outcome(job, tally, now)
            if outcome is not None:
                self._finish(job, active, outcome, now)
            elif created := self._scale(job, active, tally, now):
                # Counted at once, as the real controller does: one status write, not two.
                status["active"] = len(active) + created
        if job["status"] != stored.obj["status"]:
            self.api.commit(JOB, stored, job, "status")

    def _count(self, pods: list[Obj], tally: Tally, now: float) -> list[Obj]:
        active = []
        for pod in pods:
            uid, phase = pod["metadata"]["uid"], pod["status"].get("phase")
            if uid in tally.succeeded or uid in tally.failed:
                continue
            if phase == "Succeeded":
                tally.succeeded[uid] = _index_of(pod)
            elif phase == "Failed" or pod["metadata"].get("deletionTimestamp"):
                tally.failed[uid] = _index_of(pod)
                tally.last_failure = now
            else:
                active.append(pod)
        return active

    @staticmethod
    def _write_counts(status: Obj, pods: list[Obj], active: list[Obj], tally: Tally) -> None:
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if p["status"].get("phase") == "Running")
        status["terminating"] = sum(
            1
            for p in pods
            if p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") not in ("Succeeded", "Failed")
        )
        status["succeeded"] = len(tally.succeeded)
        status["failed"] = len(tally.failed)
        status["uncountedTerminatedPods"] = {}
        for key in ("active", "succeeded", "failed", "terminating"):
            if not status[key]:
                del status[key]
        done = {i for i in tally.succeeded.values() if i >= 0}
        if done:
            status["completedIndexes"] = _ranges(done)

    def _suspend(self, job: Obj, active: list[Obj], now: float) -> None:
        conditions = job["status"].setdefault("conditions", [])
        if not any(c["type"] == "Suspended" and c["status"] == "True" for c in conditions):
            set_condition(conditions, "Suspended", "True", now, "JobSuspended", "Job suspended")
            self.events.record(job, "Suspended", "Job suspended", COMPONENT)
        self._delete_pods(job, active)
        job["status"].pop("active", None)
        job["status"].pop("startTime", None)

    def _resume(self, job: Obj, now: float) -> None:
        conditions = job["status"].get("conditions") or []
        if any(c["type"] == "Suspended" and c["status"] == "True" for c in conditions):
            set_condition(conditions, "Suspended", "False", now, "JobResumed", "Job resumed")
            self.events.record(job, "Resumed", "Job resumed", COMPONENT)
        job["status"].setdefault("startTime", rfc3339(now))
        deadline = job["spec"].get("activeDeadlineSeconds")
        tally = self.tallies[job["metadata"]["uid"]]
        if deadline is not None and f"deadline{deadline}" not in tally.timers:
            tally.timers.add(f"deadline{deadline}")
            due = parse_rfc3339(job["status"]["startTime"]) + deadline
            key = (job["metadata"]["namespace"], job["metadata"]["name"])
            self.timers.at(due, lambda: self.dirty.add(key))

    def _outcome(self, job: Obj, tally: Tally, now: float) -> tuple[str, str, str] | None:
        spec = job["spec"]
        completions = spec.get("completions")
        if spec.get("completionMode") == "Indexed":
            done = len({i for i in tally.succeeded.values() if i >= 0}) >= (completions or 0)
        else:
            done = (
                len(tally.succeeded) >= (completions or 1) if completions else bool(tally.succeeded)
            )
        if done:
            return ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
        restarts = sum(
            cs.get("restartCount", 0)
            for p in self._pods(job)
            for cs in p["status"].get("containerStatuses") or []
        )
        if len(tally.failed) + restarts > spec.get("backoffLimit", 6):
            return ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        deadline = spec.get("activeDeadlineSeconds")
        started = job["status"].get("startTime")
        if deadline is not None and started and now >= parse_rfc3339(started) + deadline:
            return ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
        return None

    def _finish(
        self, job: Obj, active: list[Obj], outcome: tuple[str, str, str], now: float
    ) -> None:
        ctype, reason, message = outcome
        status = job["status"]
        conditions = status.setdefault("conditions", [])
        interim = "SuccessCriteriaMet" if ctype == "Complete" else "FailureTarget"
        set_condition(conditions, interim, "True", now, reason, message)
        set_condition(conditions, ctype, "True", now, reason, message)
        if ctype == "Complete":
            status["completionTime"] = rfc3339(now)
        self._delete_pods(job, active)
        status.pop("active", None)
        status.pop("ready", None)
        self.events.record(
            job,
            "Completed" if ctype == "Complete" else reason,
            "Job completed" if ctype == "Complete" else message,
            COMPONENT,
            warning=ctype == "Failed",
        )
        self._schedule_ttl(job)

    def _delete_pods(self, job: Obj, pods: list[Obj]) -> None:
        for pod in pods:
            meta = pod["metadata"]
            try:
                self.api.delete(POD, meta["namespace"], meta["name"], {})
            except ApiError:
                continue
            self.events.record(job, "SuccessfulDelete", f"Deleted pod: {meta['name']}", COMPONENT)

    def _scale(self, job: Obj, active: list[Obj], tally: Tally, now: float) -> int:
        """Create the pods the job lacks; returns how many were created."""
        spec = job["spec"]
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        if tally.failed:
            delay = min(10.0 * 2 ** (len(tally.failed) - 1), 360.0)
            if now < tally.last_failure + delay:
                self.timers.at(tally.last_failure + delay, lambda: self.dirty.add(key))
                return 0
        if now < tally.retry_at:
            return 0
        created = 0
        for index in self._wanted(spec, active, tally):
            if not self._create_pod(job, index, now, tally):
                break
            created += 1
        return created

    @staticmethod
    def _wanted(spec: Obj, active: list[Obj], tally: Tally) -> list[int]:
        parallelism, completions = spec.get("parallelism", 1), spec.get("completions")
        if spec.get("completionMode") == "Indexed":
            busy = {_index_of(p) for p in active} | set(tally.succeeded.values())
            free = [i for i in range(completions or 0) if i not in busy]
            return free[: max(0, parallelism - len(active))]
        remaining = (completions - len(tally.succeeded)) if completions else parallelism
        return [-1] * max(0, min(parallelism, remaining) - len(active))

    def _create_pod(self, job: Obj, index: int, now: float, tally: Tally) -> bool:
        meta = job["metadata"]
        template = json_copy(job["spec"]["template"])  # admission fills in the pod's copy
        pod: Obj = {"metadata": template.get("metadata") or {}, "spec": template["spec"]}
        pmeta = pod["metadata"]
        pmeta["labels"] = pmeta.get("labels") or {}
        pmeta["annotations"] = pmeta.get("annotations") or {}
        prefix = f"{meta['name']}-" if index < 0 else f"{meta['name']}-{index}-"
        pmeta.update(
            generateName=prefix,
            namespace=meta["namespace"],
            ownerReferences=[owner_ref(job, "batch/v1", "Job")],
        )
        if index >= 0:
            pmeta["annotations"][INDEX_KEY] = str(index)
            pmeta["labels"][INDEX_KEY] = str(index)
            pod["spec"]["hostname"] = f"{meta['name']}-{index}"
            for container in pod["spec"]["containers"]:
                env = container.setdefault("env", [])
                env.append({"name": "JOB_COMPLETION_INDEX", "value": str(index)})
        try:
            created = self.api.create(POD, meta["namespace"], pod)
        except ApiError as exc:
            self.events.record(
                job, "FailedCreate", f"Error creating: {exc.message}", COMPONENT, warning=True
            )
            tally.retry_at = now + 5.0
            key = (meta["namespace"], meta["name"])
            self.timers.at(tally.retry_at, lambda: self.dirty.add(key))
            return False
        self.events.record(job, "SuccessfulCreate", f"Created pod: {created.name}", COMPONENT)
        return True

    def _schedule_ttl(self, job: Obj) -> None:
        """Delete a finished Job once `ttlSecondsAfterFinished` has passed since it finished.

        The TTL may be set, changed or removed after the Job finished (the field is mutable):
        each value gets its own timer, and a timer deletes only if the Job's TTL, as it stands
        then, has run out, as the TTL-after-finished controller re-reads the Job before it acts.
        """
        due, timer = _expiry(job), f"ttl{job['spec'].get('ttlSecondsAfterFinished')}"
        tally = self.tallies.setdefault(job["metadata"]["uid"], Tally())
        if due is None or timer in tally.timers:
            return
        tally.timers.add(timer)
        namespace, name, uid = (
            job["metadata"]["namespace"],
            job["metadata"]["name"],
            job["metadata"]["uid"],
        )

        def expire() -> None:
            stored = self.api.store.get(JOB.key, namespace, name)
            if stored is None or stored.obj["metadata"]["uid"] != uid:
                return
            expires = _expiry(stored.obj)
            if expires is not None and expires <= self.api.clock.now():
                self.api.delete(JOB, namespace, name, {"propagationPolicy": "Foreground"})

        self.timers.at(due, expire)


def _expiry(job: Obj) -> float | None:
    """When a finished Job's TTL runs out; None while it runs or has no TTL."""
    ttl = job["spec"].get("ttlSecondsAfterFinished")
    finished = [
        c
        for c in job.get("status", {}).get("conditions") or []
        if c["type"] in ("Complete", "Failed") and c["status"] == "True"
    ]
    if ttl is None or not finished:
        return None
    return float(parse_rfc3339(finished[0]["lastTransitionTime"]) + ttl)
