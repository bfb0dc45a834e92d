"""Pod binding (kube-scheduler's job): binds pending pods to nodes, best fit on free GPUs.

Nodes are indexed by their number of free GPUs, so a pod asking for g GPUs looks at nodes with
exactly g free first (least fragmentation) and never scans full nodes. Pending pods are retried
only when capacity changes, in priority order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from kubesim.api import Api
from kubesim.events import EventRecorder
from kubesim.meta import set_condition
from kubesim.placement import GPU, NodeInfo, pinned_nodes, pod_requests, why_not
from kubesim.resources import NODE, POD
from kubesim.store import Stored

Obj = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")


class PodBinder:
    """What `default-scheduler` does for a pod, run from the simulation's tick."""

    def __init__(self, api: Api, events: EventRecorder) -> None:
        self.api = api
        self.events = events
        self.nodes: dict[str, NodeInfo] = {}
        self.buckets: dict[int, dict[str, None]] = {}
        self.bucket_of: dict[str, int] = {}
        self.bound: dict[str, tuple[str, dict[str, float]]] = {}
        self.pending: dict[str, tuple[str, str]] = {}
        self.fresh: set[str] = set()
        self.retry = False
        self.reported: set[str] = set()
        api.store.listeners.append(self.on_change)

    def on_change(self, resource: str, type_: str, new: Stored, old: Stored | None) -> None:
        if resource == NODE.key:
            self._refresh_node(new.obj, type_ == "DELETED")
        elif resource == POD.key:
            self._on_pod(type_, new.obj)

    def _refresh_node(self, node: Obj, deleted: bool) -> None:
        name = node["metadata"]["name"]
        previous = self.nodes.pop(name, None)
        self._unindex(name)
        self.retry = True
        if deleted:
            return
        info = NodeInfo.from_node(node)
        if previous is not None:
            info.used, info.pods = previous.used, previous.pods
        self.nodes[name] = info
        self._index(info)

    def _index(self, info: NodeInfo) -> None:
        free = int(info.free(GPU))
        self.buckets.setdefault(free, {})[info.name] = None
        self.bucket_of[info.name] = free

    def _unindex(self, name: str) -> None:
        free = self.bucket_of.pop(name, None)
        if free is not None:
            del self.buckets[free][name]

    def _on_pod(self, type_: str, pod: Obj) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        uid = meta["uid"]
        done = type_ == "DELETED" or pod.get("status", {}).get("phase") in TERMINAL
        if uid in self.bound and done:
            self._account(uid, -1)
        elif spec.get("nodeName") and uid not in self.bound and not done:
            self.bound[uid] = (spec["nodeName"], pod_requests(pod))
            self._account(uid, +1, pod)
        waiting = not spec.get("nodeName") and not done and not meta.get("deletionTimestamp")
        if waiting and spec.get("schedulerName", "default-scheduler") == "default-scheduler":
            if uid not in self.pending:
                self.pending[uid] = (meta["namespace"], meta["name"])
                self.fresh.add(uid)
        else:
            self.pending.pop(uid, None)
            self.fresh.discard(uid)
            self.reported.discard(uid)

    def _account(self, uid: str, sign: int, pod: Obj | None = None) -> None:
        node_name, requests = self.bound[uid] if sign > 0 else self.bound.pop(uid)
        info = self.nodes.get(node_name)
        if info is None:
            return
        self._unindex(node_name)
        for resource, amount in requests.items():
            info.used[resource] += sign * amount
        if pod is not None:
            info.pods[uid] = {
                "metadata": {
                    "namespace": pod["metadata"]["namespace"],
                    "labels": pod["metadata"].get("labels") or {},
                }
            }
        else:
            info.pods.pop(uid, None)
            self.retry = True
        self._index(info)

    def run(self) -> None:
        if not self.pending or not (self.retry or self.fresh):
            return
        uids = list(self.pending) if self.retry else list(self.fresh)
        self.retry, self.fresh = False, set()
        pods = [s for s in (self.api.store.get(POD.key, *self.pending[u]) for u in uids) if s]
        pods.sort(
            key=lambda s: (
                -s.obj["spec"].get("priority", 0),
                s.obj["metadata"]["creationTimestamp"],
                s.name,
            )
        )
        failed: dict[tuple[float, ...], None] = {}
        for stored in pods:
            self._schedule(stored, failed)

    def _candidates(self, pod: Obj, gpus: float) -> Iterator[NodeInfo]:
        pinned = pinned_nodes(pod)
        if pinned is not None:
            yield from (self.nodes[n] for n in sorted(pinned) if n in self.nodes)
            return
        for free in sorted(f for f in self.buckets if f >= gpus):
            yield from (self.nodes[n] for n in list(self.buckets[free]))

    def _schedule(self, stored: Stored, failed: dict[tuple[float, ...], None]) -> None:
        pod = stored.obj
        requests = pod_requests(pod)
        plain = not (pod["spec"].get("nodeSelector") or pod["spec"].get("affinity"))
        shape = tuple(requests.values())
        if plain and shape in failed:
            return  # an identical unconstrained pod just failed this round
        for node in self._candidates(pod, requests[GPU]):
            if why_not(pod, requests, node) is None:
                self._bind(stored, node.name)
                return
        if plain:
            failed[shape] = None
        self._unschedulable(stored, requests)

    def _bind(self, stored: Stored, node: str) -> None:
        pod = stored.thaw("status")
        pod["spec"] = {**pod["spec"], "nodeName": node}
        conditions = pod["status"].setdefault("conditions", [])
        set_condition(conditions, "PodScheduled", "True", self.api.clock.now())
        committed = self.api.commit(POD, stored, pod, "*")
        meta = committed.obj["metadata"]
        self.events.record(
            committed.obj,
            "Scheduled",
            f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
            "default-scheduler",
        )

    def _unschedulable(self, stored: Stored, requests: dict[str, float]) -> None:
        uid = stored.obj["metadata"]["uid"]
        if uid in self.reported:
            return  # reported once; the real scheduler's repeats only bump the event's count
        self.reported.add(uid)
        reasons = Counter(why_not(stored.obj, requests, n) for n in self.nodes.values())
        parts = ", ".join(
            f"{count} {reason}" for reason, count in sorted(reasons.items(), key=str) if reason
        )
        message = f"0/{len(self.nodes)} nodes are available: {parts}."
        pod = stored.thaw("status")
        set_condition(
            pod["status"].setdefault("conditions", []),
            "PodScheduled",
            "False",
            self.api.clock.now(),
            "Unschedulable",
            message,
        )
        self.api.commit(POD, stored, pod, "*")
        self.events.record(pod, "FailedScheduling", message, "default-scheduler", warning=True)
