"""The simulation: the store, the API verbs and every controller, advanced by `tick()`.

Everything here runs on the server's event loop thread; callers on other threads go through
`KubeSim`, which hands their calls to the loop.
"""

from __future__ import annotations

from kubesim.api import Api
from kubesim.binding import PodBinder
from kubesim.clock import Clock
from kubesim.cluster import ClusterSpec
from kubesim.events import EventRecorder
from kubesim.gc import GarbageCollector
from kubesim.jobs import JobController
from kubesim.kubelet import Kubelet
from kubesim.nodelifecycle import NodeLifecycle
from kubesim.nodes import cluster_nodes
from kubesim.nvml.gpu import NodeGpus
from kubesim.quota import quota_status
from kubesim.resources import JOB, NAMESPACE, NODE, POD, PRIORITYCLASS, QUOTA, SERVICEACCOUNT
from kubesim.store import Store, Stored
from kubesim.timers import Timers

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


class Simulation:
    """One simulated cluster."""

    def __init__(self, cluster: ClusterSpec, clock: Clock, history_size: int = 20000) -> None:
        self.clock = clock
        self.store = Store(history_size=history_size)
        self.api = Api(self.store, clock, cluster.toleration_seconds)
        self.timers = Timers()
        self.events = EventRecorder(self.api)
        self.gpus: dict[str, NodeGpus] = {}
        self.binder = PodBinder(self.api, self.events)
        self.kubelet = Kubelet(
            self.api, self.events, self.timers, self.gpus, cluster.container_start_seconds
        )
        self.jobs = JobController(self.api, self.events, self.timers)
        self.gc = GarbageCollector(self.api)
        self.lifecycle = NodeLifecycle(
            self.api, self.events, self.timers, self.kubelet, cluster.heartbeat_seconds
        )
        self.quota_dirty: set[str] = set()
        self.store.listeners.append(self._track_quota)
        self._bootstrap(cluster)

    def _bootstrap(self, cluster: ClusterSpec) -> None:
        for name in SYSTEM_NAMESPACES:
            self.api.create(NAMESPACE, "", {"metadata": {"name": name}})
        for name, value in SYSTEM_PRIORITY.items():
            self.api.create(
                PRIORITYCLASS,
                "",
                {
                    "metadata": {"name": name},
                    "value": value,
                    "globalDefault": False,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "description": "Used for system critical pods that must not be moved "
                    "from their current node.",
                },
            )
        for pool, node in cluster_nodes(cluster, self.clock.now()):
            if pool.gpu is not None:
                name = node["metadata"]["name"]
                self.gpus[name] = NodeGpus(name, pool.gpu, pool.gpus_per_node, self.clock)
            self.api.create(NODE, "", node)

    def _track_quota(self, resource: str, type_: str, new: Stored, old: Stored | None) -> None:
        if resource in (POD.key, JOB.key, QUOTA.key):
            self.quota_dirty.add(new.namespace)
        if resource == NAMESPACE.key and type_ == "ADDED":
            self.api.create(SERVICEACCOUNT, new.name, {"metadata": {"name": "default"}})

    def tick(self) -> None:
        """Run every controller once over what changed and whatever timer is due."""
        for _ in range(10):  # controllers feed each other; settle a few rounds per tick
            self.timers.run_due(self.clock.now())
            self.gc.run()
            self.jobs.run()
            self.binder.run()
            if not (self.gc.gone or self.jobs.dirty or self.binder.fresh or self.binder.retry):
                break
        self._update_quotas()

    def _update_quotas(self) -> None:
        dirty, self.quota_dirty = self.quota_dirty, set()
        for namespace in dirty:
            quotas = list(self.store.items(QUOTA.key, namespace))
            if not quotas:
                continue
            used = self.api.usage.of(namespace)
            for stored in quotas:
                status = quota_status(stored.obj, used)
                if stored.obj.get("status") != status:
                    obj = stored.thaw()
                    obj["status"] = status
                    self.api.commit(QUOTA, stored, obj, "*")
