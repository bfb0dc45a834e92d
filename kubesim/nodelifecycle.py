"""Node heartbeats and the node lifecycle controller's NotReady handling.

A NotReady node gets Ready=Unknown ("Kubelet stopped posting node status."), the
node.kubernetes.io/unreachable NoSchedule and NoExecute taints, and its pods Ready=False. The
taint manager then evicts each pod once its toleration for the taint runs out (the
DefaultTolerationSeconds toleration every pod gets, `tolerationSeconds` in the cluster file): the
pod gets a DisruptionTarget condition and is deleted gracefully. Its kubelet being unreachable, the
pod stays Terminating until the node comes back; the Job controller counts it failed at once and
creates a replacement elsewhere.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from kubesim.api import Api
from kubesim.clock import rfc3339
from kubesim.errors import ApiError
from kubesim.events import EventRecorder
from kubesim.kubelet import Kubelet
from kubesim.meta import set_condition
from kubesim.nodes import ready_conditions
from kubesim.resources import NODE, POD
from kubesim.timers import Timers

Obj = dict[str, Any]
UNREACHABLE = "node.kubernetes.io/unreachable"


class NodeLifecycle:
    """Heartbeats for healthy nodes; NotReady/Ready transitions on request (faults)."""

    def __init__(
        self, api: Api, events: EventRecorder, timers: Timers, kubelet: Kubelet, heartbeat_s: float
    ) -> None:
        self.api = api
        self.events = events
        self.timers = timers
        self.kubelet = kubelet
        self.heartbeat_s = heartbeat_s
        self.timers.at(api.clock.now() + heartbeat_s, self.heartbeat)

    def heartbeat(self) -> None:
        now = self.api.clock.now()
        for stored in list(self.api.store.items(NODE.key)):
            if stored.name in self.kubelet.down:
                continue
            node = stored.thaw("status")
            for cond in node["status"].get("conditions") or []:
                cond["lastHeartbeatTime"] = rfc3339(now)
            self.api.commit(NODE, stored, node, "*")
        self.timers.at(now + self.heartbeat_s, self.heartbeat)

    def _write_node(self, name: str, ready: bool) -> Obj:
        stored = self.api.get(NODE, "", name)
        node, now = stored.thaw("status", "spec"), self.api.clock.now()
        node["status"]["conditions"] = ready_conditions(now, "True" if ready else "Unknown")
        taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != UNREACHABLE]
        if not ready:
            taints += [
                {"key": UNREACHABLE, "effect": e, "timeAdded": rfc3339(now)}
                for e in ("NoSchedule", "NoExecute")
            ]
        node["spec"]["taints"] = taints
        if not taints:
            del node["spec"]["taints"]
        committed = self.api.commit(NODE, stored, node, "*")
        status = "NodeReady" if ready else "NodeNotReady"
        self.events.record(
            committed.obj,
            status,
            f"Node {name} status is now: {status}",
            "node-controller",
            warning=not ready,
        )
        return committed.obj

    def set_not_ready(self, name: str) -> None:
        self.kubelet.down.add(name)
        self._write_node(name, ready=False)
        now = self.api.clock.now()
        for stored in list(self.api.store.items(POD.key)):
            pod = stored.obj
            if pod["spec"].get("nodeName") != name or pod["status"].get("phase") in (
                "Succeeded",
                "Failed",
            ):
                continue
            copy = stored.thaw("status")
            set_condition(copy["status"].setdefault("conditions", []), "Ready", "False", now)
            self.api.commit(POD, stored, copy, "*")
            seconds = self._toleration_seconds(pod)
            if seconds is not None:
                uid, ns, pod_name = pod["metadata"]["uid"], stored.namespace, stored.name
                self.timers.at(now + seconds, partial(self._evict, name, ns, pod_name, uid))

    @staticmethod
    def _toleration_seconds(pod: Obj) -> float | None:
        """Seconds before eviction: 0 if not tolerated, None if tolerated for ever."""
        for t in pod["spec"].get("tolerations") or []:
            matches_key = t.get("operator") == "Exists" and t.get("key") in (None, "", UNREACHABLE)
            if (matches_key or t.get("key") == UNREACHABLE) and t.get("effect") in (
                None,
                "",
                "NoExecute",
            ):
                seconds = t.get("tolerationSeconds")
                return None if seconds is None else max(0.0, float(seconds))
        return 0.0

    def _evict(self, node: str, namespace: str, name: str, uid: str) -> None:
        stored = self.api.store.get(POD.key, namespace, name)
        if node not in self.kubelet.down or stored is None or stored.obj["metadata"]["uid"] != uid:
            return
        pod = stored.thaw("status")
        set_condition(
            pod["status"].setdefault("conditions", []),
            "DisruptionTarget",
            "True",
            self.api.clock.now(),
            "DeletionByTaintManager",
            "Taint manager: deleting due to NoExecute taint",
        )
        committed = self.api.commit(POD, stored, pod, "*")
        self.events.record(
            committed.obj,
            "TaintManagerEviction",
            f"Marking for deletion Pod {namespace}/{name}",
            "taint-eviction-controller",
        )
        try:
            self.api.delete(POD, namespace, name, {})
        except ApiError:
            return

    def set_ready(self, name: str) -> None:
        self._write_node(name, ready=True)
        self.kubelet.node_recovered(name)
