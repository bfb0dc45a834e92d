"""Node objects built from the cluster file, labelled as GPU Feature Discovery labels them."""

from __future__ import annotations

import uuid
from typing import Any

from kubesim.clock import rfc3339
from kubesim.cluster import ClusterSpec, Pool

Obj = dict[str, Any]

KUBELET_VERSION = "v1.37.0-kubesim"


def _labels(pool: Pool, name: str) -> dict[str, str]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": pool.name,
        "kubesim.io/pool": pool.name,
    }
    if pool.rack:
        labels["topology.kubernetes.io/zone"] = pool.rack
    if pool.gpu is not None:
        domain = name if pool.nvlink_domain == "per-node" else pool.nvlink_domain
        labels |= {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": pool.gpu.label,
            "nvidia.com/gpu.count": str(pool.gpus_per_node),
            "nvidia.com/gpu.memory": str(pool.gpu.memory_mib),
            "nvidia.com/gpu.family": pool.gpu.family,
            "nvidia.com/gpu.clique": domain,
        }
    return labels | pool.labels


def ready_conditions(now: float, ready: str = "True") -> list[Obj]:
    stamp = rfc3339(now)
    pressure = "False" if ready == "True" else "Unknown"
    conditions = [
        (
            "MemoryPressure",
            pressure,
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        ("DiskPressure", pressure, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        (
            "PIDPressure",
            pressure,
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        ("Ready", ready, "KubeletReady", "kubelet is posting ready status"),
    ]
    if ready != "True":
        conditions = [
            (t, s, "NodeStatusUnknown", "Kubelet stopped posting node status.")
            for t, s, _, _ in conditions
        ]
    return [
        {
            "type": t,
            "status": s,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
            "reason": r,
            "message": m,
        }
        for t, s, r, m in conditions
    ]


def node_object(pool: Pool, index: int, serial: int, now: float) -> Obj:
    name = f"{pool.name}-{index}"
    capacity = {
        "cpu": pool.cpu,
        "memory": pool.memory,
        "pods": "110",
        "ephemeral-storage": "1844Gi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    if pool.gpu is not None:
        capacity["nvidia.com/gpu"] = str(pool.gpus_per_node)
    ip = f"10.0.{serial // 250}.{serial % 250 + 2}"
    return {
        "metadata": {
            "name": name,
            "labels": _labels(pool, name),
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "podCIDR": f"10.244.{serial % 256}.0/24",
            "providerID": f"kubesim://{name}",
            **({"taints": list(pool.taints)} if pool.taints else {}),
        },
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": ready_conditions(now),
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                "bootID": str(uuid.uuid4()),
                "kernelVersion": "6.8.0-kubesim",
                "osImage": "Ubuntu 24.04 LTS",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def cluster_nodes(spec: ClusterSpec, now: float) -> list[tuple[Pool, Obj]]:
    result, serial = [], 0
    for pool in spec.pools:
        for i in range(pool.count):
            result.append((pool, node_object(pool, i, serial, now)))
            serial += 1
    return result
