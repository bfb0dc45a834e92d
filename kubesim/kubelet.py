"""The kubelets of all nodes: start containers, run them for their simulated runtime, stop them.

A pod's runtime and exit code come from its annotations (`kubesim.io/runtime-seconds`,
`kubesim.io/exit-code`, `kubesim.io/gpu-util`); without them a Job's pod runs 60 s and exits 0
and any other pod runs until deleted. A kubelet whose node is NotReady does nothing: its pods
freeze until the node comes back, as a partitioned node's pods do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesim import downward
from kubesim.api import Api
from kubesim.clock import rfc3339
from kubesim.events import EventRecorder
from kubesim.logs import Run
from kubesim.meta import set_condition
from kubesim.nvml.gpu import NodeGpus
from kubesim.placement import GPU, pod_requests
from kubesim.resources import POD
from kubesim.store import Stored
from kubesim.timers import Timers

Obj = dict[str, Any]

STARTUP_S = 1.0
STOP_S = 1.0
DEFAULT_JOB_RUNTIME_S = 60.0
GPU_ANNOTATION = "kubesim.io/gpus"


@dataclass
class PodState:
    """What the kubelet remembers about a pod it runs."""

    namespace: str
    name: str
    node: str
    runs: list[Run] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    stage: str = "creating"  # creating, running, backoff, done, killing
    files: dict[str, str] = field(default_factory=dict)
    """Its downward API files as its containers see them (`kubesim.downward`)."""


def _annotation(pod: Obj, key: str, default: float) -> float:
    try:
        return float((pod["metadata"].get("annotations") or {}).get(key, default))
    except ValueError:
        return default


def _runtime(pod: Obj) -> float | None:
    owned = bool(pod["metadata"].get("ownerReferences"))
    default = (
        None
        if pod["spec"].get("restartPolicy") == "Always" and not owned
        else DEFAULT_JOB_RUNTIME_S
    )
    value = _annotation(pod, "kubesim.io/runtime-seconds", -1)
    return value if value >= 0 else default


class Kubelet:
    """All nodes' kubelets; `node_ready` tells which are reachable."""

    def __init__(
        self,
        api: Api,
        events: EventRecorder,
        timers: Timers,
        gpus: dict[str, NodeGpus],
        startup_s: float = STARTUP_S,
    ) -> None:
        self.api = api
        self.startup_s = startup_s
        self.events = events
        self.timers = timers
        self.gpus = gpus
        self.pods: dict[str, PodState] = {}
        self.down: set[str] = set()
        self._waiting: dict[str, set[Callable[[], None]]] = {}
        api.store.listeners.append(self.on_change)

    def wake_on_change(self, uid: str, wake: Callable[[], None]) -> None:
        """Call `wake` once, at the pod's next change (a log follower waits for its end)."""
        self._waiting.setdefault(uid, set()).add(wake)

    def forget_wake(self, uid: str, wake: Callable[[], None]) -> None:
        waiting = self._waiting.get(uid)
        if waiting is not None:
            waiting.discard(wake)
            if not waiting:
                del self._waiting[uid]

    def on_change(self, resource: str, type_: str, new: Stored, old: Stored | None) -> None:
        if resource != POD.key:
            return
        pod, uid = new.obj, new.obj["metadata"]["uid"]
        for wake in self._waiting.pop(uid, ()):
            wake()
        state = self.pods.get(uid)
        if type_ == "DELETED":
            if state is not None:
                self._stop(state)  # deleted at once (grace 0): its container is gone too
                self._release(uid, state)
                del self.pods[uid]
            return
        node = pod["spec"].get("nodeName")
        if state is None and node and pod["status"].get("phase") == "Pending":
            state = PodState(pod["metadata"]["namespace"], pod["metadata"]["name"], node)
            state.files = downward.files(pod)
            self.pods[uid] = state
            self.timers.at(self.api.clock.now() + self.startup_s, lambda: self._start(uid))
        elif (
            state is not None
            and pod["metadata"].get("deletionTimestamp")
            and state.stage != "killing"
        ):
            grace = pod["metadata"].get("deletionGracePeriodSeconds", 30)
            running = state.stage == "running"
            state.stage = "killing"
            if running and grace > 0:
                self._note(state, f"kubesim: SIGTERM, SIGKILL in {grace} s")
            self.timers.at(self.api.clock.now() + min(grace, STOP_S), lambda: self._kill(uid))
        elif state is not None:
            self._sync_files(state, pod)

    def _sync_files(self, state: PodState, pod: Obj) -> None:
        """Rewrite the pod's downward API files that changed; a running container notices."""
        fresh = downward.files(pod)
        for path, content in sorted(fresh.items()):
            if state.files.get(path) != content and state.stage == "running":
                self._note(state, f"kubesim: file {path}: {content!r}")
        state.files = fresh

    def _note(self, state: PodState, text: str) -> None:
        if state.runs and state.runs[-1].finished is None:
            state.runs[-1].notes.append((self.api.clock.now(), text))

    def _current(self, uid: str) -> tuple[PodState, Stored] | None:
        state = self.pods.get(uid)
        stored = self.api.store.get(POD.key, state.namespace, state.name) if state else None
        if state is None or stored is None or stored.obj["metadata"]["uid"] != uid:
            return None
        return state, stored

    def _deferred(self, state: PodState, retry: Any) -> bool:
        if state.node in self.down:
            self.timers.at(self.api.clock.now() + 1.0, retry)
            return True
        return False

    def _start(self, uid: str) -> None:
        found = self._current(uid)
        if found is None or found[0].stage not in ("creating", "backoff"):
            return
        state, stored = found
        if self._deferred(state, lambda: self._start(uid)):
            return
        pod, now = stored.thaw("status"), self.api.clock.now()
        if not state.gpus and (count := int(pod_requests(pod)[GPU])) and state.node in self.gpus:
            util = _annotation(pod, "kubesim.io/gpu-util", 90.0)
            state.gpus = self.gpus[state.node].allocate(uid, count, util)
            annotations = pod["metadata"].get("annotations") or {}
            pod["metadata"]["annotations"] = {
                **annotations,
                GPU_ANNOTATION: ",".join(map(str, state.gpus)),
            }
        runtime = _runtime(pod)
        run = Run(
            now,
            None if runtime is None else now + runtime,
            int(_annotation(pod, "kubesim.io/exit-code", 0)),
        )
        state.runs.append(run)
        first = state.stage == "creating"
        state.stage = "running"
        self._write_running(pod, state, run, now)
        committed = self.api.commit(POD, stored, pod, "*")
        if first:
            for reason, text in self._start_events(pod):
                self.events.record(committed.obj, reason, text, "kubelet", host=state.node)
        if run.ends is not None:
            self.timers.at(run.ends, lambda: self._finish(uid, run))

    @staticmethod
    def _start_events(pod: Obj) -> list[tuple[str, str]]:
        found = []
        for c in pod["spec"]["containers"]:
            found += [
                ("Pulled", f'Container image "{c["image"]}" already present on machine'),
                ("Created", f"Created container: {c['name']}"),
                ("Started", f"Started container {c['name']}"),
            ]
        return found

    def _write_running(self, pod: Obj, state: PodState, run: Run, now: float) -> None:
        status = pod["status"]
        status["phase"] = "Running"
        status.setdefault("startTime", rfc3339(now))
        status["hostIP"] = status["podIP"] = self._pod_ip(state)
        status["hostIPs"], status["podIPs"] = [{"ip": status["hostIP"]}], [{"ip": status["podIP"]}]
        conditions = status.setdefault("conditions", [])
        for ctype in (
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        ):
            set_condition(conditions, ctype, "True", now)
        previous = {c["name"]: c for c in status.get("containerStatuses") or []}
        status["containerStatuses"] = [
            self._container_status(
                c, previous.get(c["name"]), {"running": {"startedAt": rfc3339(run.started)}}, True
            )
            for c in pod["spec"]["containers"]
        ]

    @staticmethod
    def _pod_ip(state: PodState) -> str:
        return f"10.244.{abs(hash(state.node)) % 256}.{abs(hash(state.name)) % 250 + 2}"

    @staticmethod
    def _container_status(container: Obj, previous: Obj | None, state: Obj, ready: bool) -> Obj:
        image = container["image"]
        status: Obj = {
            "name": container["name"],
            "image": image,
            "imageID": f"docker.io/{image}@sha256:0",
            "containerID": f"containerd://{abs(hash((container['name'], str(state)))):016x}",
            "ready": ready,
            "started": "running" in state,
            "state": state,
            "restartCount": previous.get("restartCount", 0) if previous else 0,
        }
        if previous and previous.get("lastState"):
            status["lastState"] = previous["lastState"]
        return status

    def _finish(self, uid: str, run: Run) -> None:
        found = self._current(uid)
        if found is None or found[0].stage != "running" or found[0].runs[-1] is not run:
            return
        state, stored = found
        if self._deferred(state, lambda: self._finish(uid, run)):
            return
        pod, now = stored.thaw("status"), self.api.clock.now()
        run.finished = now
        policy = pod["spec"].get("restartPolicy", "Always")
        restart = policy == "Always" or (policy == "OnFailure" and run.exit_code != 0)
        self._write_terminated(pod, run, restart, now)
        if restart:
            state.stage = "backoff"
            delay = min(10.0 * 2 ** (len(state.runs) - 1), 300.0)
            self.timers.at(now + delay, lambda: self._start(uid))
        else:
            state.stage = "done"
            self._release(uid, state)
        self.api.commit(POD, stored, pod, "*")
        if restart:
            self.events.record(
                pod,
                "BackOff",
                "Back-off restarting failed container",
                "kubelet",
                warning=True,
                host=state.node,
            )

    def _write_terminated(self, pod: Obj, run: Run, restart: bool, now: float) -> None:
        terminated = {
            "exitCode": run.exit_code,
            "reason": "Completed" if run.exit_code == 0 else "Error",
            "startedAt": rfc3339(run.started),
            "finishedAt": rfc3339(now),
        }
        status = pod["status"]
        statuses = []
        for cs in status.get("containerStatuses") or []:
            if restart:
                cs = {
                    **cs,
                    "lastState": {"terminated": terminated},
                    "restartCount": cs.get("restartCount", 0) + 1,
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": "back-off restarting failed container",
                        }
                    },
                }
            else:
                cs = {**cs, "state": {"terminated": terminated}}
            statuses.append({**cs, "ready": False, "started": False})
        status["containerStatuses"] = statuses
        conditions = status.setdefault("conditions", [])
        reason = "PodCompleted" if not restart else "ContainersNotReady"
        for ctype in ("Ready", "ContainersReady"):
            set_condition(conditions, ctype, "False", now, reason)
        if not restart:
            status["phase"] = "Succeeded" if run.exit_code == 0 else "Failed"
            set_condition(conditions, "PodReadyToStartContainers", "False", now)

    def _kill(self, uid: str) -> None:
        found = self._current(uid)
        if found is None:
            return
        state, stored = found
        if self._deferred(state, lambda: self._kill(uid)):
            return
        for container in stored.obj["spec"]["containers"]:
            if state.runs:
                self.events.record(
                    stored.obj,
                    "Killing",
                    f"Stopping container {container['name']}",
                    "kubelet",
                    host=state.node,
                )
        self._stop(state)
        if stored.obj["metadata"].get("finalizers"):
            return
        self.api.store.remove(POD.key, state.namespace, state.name)

    def _stop(self, state: PodState) -> None:
        """The running container is killed (SIGKILL's exit code)."""
        if state.runs and state.runs[-1].finished is None:
            state.runs[-1].finished = self.api.clock.now()
            state.runs[-1].exit_code = 137

    def _release(self, uid: str, state: PodState) -> None:
        if state.gpus and state.node in self.gpus:
            self.gpus[state.node].release(uid)

    def node_recovered(self, node: str) -> None:
        self.down.discard(node)
