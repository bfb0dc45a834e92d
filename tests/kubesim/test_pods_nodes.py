"""Kubelet and node behaviour: phases, logs, nodes as GPU Feature Discovery labels them,
NotReady eviction, and a restart that keeps the cluster's state."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim import KubeSim, ManualClock
from tests.kubesim.conftest import job_manifest, pod_manifest, wait_for


def _phase(core: client.CoreV1Api, namespace: str, name: str) -> str:
    return str(core.read_namespaced_pod(name, namespace).status.phase)


def test_nodes_carry_gpu_labels_capacity_and_ready(core: client.CoreV1Api) -> None:
    node = core.read_node("h100-a-0")
    labels = node.metadata.labels
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert (
        labels["nvidia.com/gpu.count"] == "8" and labels["topology.kubernetes.io/zone"] == "rack-a"
    )
    assert (
        node.status.capacity["nvidia.com/gpu"] == "8"
        and node.status.allocatable["nvidia.com/gpu"] == "8"
    )
    ready = next(c for c in node.status.conditions if c.type == "Ready")
    assert ready.status == "True" and ready.last_heartbeat_time is not None
    a100 = core.list_node(label_selector="nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB").items
    assert len(a100) == 4


def test_pod_exit_code_decides_its_phase(core: client.CoreV1Api, namespace: str) -> None:
    body = pod_manifest("fails", runtime=1, restartPolicy="Never")
    body["metadata"]["annotations"]["kubesim.io/exit-code"] = "2"
    core.create_namespaced_pod(namespace, body)
    wait_for(lambda: _phase(core, namespace, "fails") == "Failed", what="Failed")
    state = core.read_namespaced_pod("fails", namespace).status.container_statuses[0].state
    assert state.terminated.exit_code == 2 and state.terminated.reason == "Error"


def test_log_is_refused_while_the_container_is_waiting(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("waiting", gpus=9))
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod_log("waiting", namespace)
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["message"] == (
        'container "main" in pod "waiting" is waiting to start: PodInitializing'
    )


def test_logs_grow_and_honour_tail_and_timestamps(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("train", gpus=1, runtime=600))
    wait_for(lambda: _phase(core, namespace, "train") == "Running", what="Running")
    first = core.read_namespaced_pod_log("train", namespace)
    wait_for(
        lambda: len(core.read_namespaced_pod_log("train", namespace)) > len(first) + 100,
        what="growth",
    )
    assert first.startswith("kubesim: container main started on ")
    assert "step=1 loss=" in core.read_namespaced_pod_log("train", namespace)
    tail = core.read_namespaced_pod_log("train", namespace, tail_lines=2).splitlines()
    assert len(tail) == 2 and all("samples/s=" in line for line in tail)
    stamped = core.read_namespaced_pod_log("train", namespace, tail_lines=1, timestamps=True)
    assert stamped[:4].isdigit() and stamped.split(" ", 1)[0].endswith("Z")


def test_followed_log_ends_when_the_container_exits(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(
        namespace, pod_manifest("short", gpus=1, runtime=4, restartPolicy="Never")
    )
    wait_for(lambda: _phase(core, namespace, "short") == "Running", what="Running")
    response = core.read_namespaced_pod_log("short", namespace, follow=True, _preload_content=False)
    text = response.read().decode()
    assert text.rstrip().endswith("training finished") and "step=3" in text


def test_followed_log_ends_when_the_pod_is_deleted_at_once(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("gone", gpus=1, runtime=600))
    wait_for(lambda: _phase(core, namespace, "gone") == "Running", what="Running")
    response = core.read_namespaced_pod_log(
        "gone", namespace, follow=True, _preload_content=False, _request_timeout=20
    )
    core.delete_namespaced_pod("gone", namespace, grace_period_seconds=0)
    deadline, text = time.monotonic() + 20, b""
    for chunk in response.stream(1024):  # ends with the stream; lines keep coming otherwise
        text += chunk
        assert time.monotonic() < deadline, "the followed log outlived its pod"
    assert text.decode().startswith("kubesim: container main started on ")


def test_previous_log_is_served_after_a_restart(core: client.CoreV1Api, namespace: str) -> None:
    body = pod_manifest("crashy", runtime=1, restartPolicy="OnFailure")
    body["metadata"]["annotations"]["kubesim.io/exit-code"] = "1"
    core.create_namespaced_pod(namespace, body)
    wait_for(
        lambda: (
            core.read_namespaced_pod("crashy", namespace).status.container_statuses
            and core.read_namespaced_pod("crashy", namespace)
            .status.container_statuses[0]
            .restart_count
            >= 1
        ),
        what="restart",
        timeout=20,
    )
    wait_for(
        lambda: (
            _phase(core, namespace, "crashy") == "Running"
            and core.read_namespaced_pod("crashy", namespace)
            .status.container_statuses[0]
            .state.running
        ),
        what="second run",
        timeout=20,
    )
    previous = core.read_namespaced_pod_log("crashy", namespace, previous=True)
    assert previous.rstrip().endswith("error: exiting with code 1")


def test_not_ready_node_is_tainted_and_its_pods_are_evicted(
    sim: KubeSim, core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    pin = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["rack-c"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    batch.create_namespaced_job(
        namespace, job_manifest("victim", runtime=600, pod={"affinity": pin})
    )
    pod = wait_for(
        lambda: [
            p for p in core.list_namespaced_pod(namespace).items if p.status.phase == "Running"
        ],
        what="Running",
    )[0]
    node = pod.spec.node_name
    fault = sim.inject_fault("node-notready", node)
    try:
        view = core.read_node(node)
        ready = next(c for c in view.status.conditions if c.type == "Ready")
        assert ready.status == "Unknown" and ready.reason == "NodeStatusUnknown"
        assert {(t.key, t.effect) for t in view.spec.taints} == {
            ("node.kubernetes.io/unreachable", "NoSchedule"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
        }
        evicted = wait_for(
            lambda: (
                core.read_namespaced_pod(pod.metadata.name, namespace).metadata.deletion_timestamp
                and core.read_namespaced_pod(pod.metadata.name, namespace)
            ),
            what="eviction",
        )
        target = next(c for c in evicted.status.conditions if c.type == "DisruptionTarget")
        assert target.reason == "DeletionByTaintManager"
        replacement = wait_for(
            lambda: [
                p
                for p in core.list_namespaced_pod(namespace).items
                if p.metadata.name != pod.metadata.name and p.spec.node_name
            ],
            what="replacement",
        )
        assert replacement[0].spec.node_name != node
    finally:
        sim.clear_faults(fault.id)
    wait_for(
        lambda: (
            pod.metadata.name
            not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
        ),
        what="terminating pod removed once the node is back",
    )
    assert not core.read_node(node).spec.taints


def test_restart_on_the_same_port_keeps_the_cluster_state() -> None:
    with KubeSim(speed=40) as sim:
        config = client.Configuration()
        config.host = sim.url
        batch = client.BatchV1Api(client.ApiClient(config))
        batch.create_namespaced_job("default", job_manifest("survivor", runtime=600))
        wait_for(
            lambda: batch.read_namespaced_job("survivor", "default").status.active, what="active"
        )
        url = sim.url
        sim.stop()
        with pytest.raises(Exception):  # noqa: B017 - any connection error proves the outage
            client.BatchV1Api(client.ApiClient(config)).list_namespaced_job(
                "default", _request_timeout=1
            )
        sim.start()
        assert sim.url == url
        job = batch.read_namespaced_job("survivor", "default")
        assert job.status.active == 1


def _bound_pod(sim: KubeSim, name: str) -> client.CoreV1Api:
    """Create a pod that runs 100 s once started; return the client once it is bound."""
    config = client.Configuration()
    config.host = sim.url
    core = client.CoreV1Api(client.ApiClient(config))
    core.create_namespaced_pod(
        "default", pod_manifest(name, gpus=1, runtime=100, restartPolicy="Never")
    )
    wait_for(lambda: core.read_namespaced_pod(name, "default").spec.node_name, what="bound")
    return core


def test_manual_clock_decides_when_pods_progress() -> None:
    clock = ManualClock()
    with KubeSim(clock=clock) as sim:
        core = _bound_pod(sim, "ticks")
        time.sleep(0.2)
        assert _phase(core, "default", "ticks") == "Pending"
        clock.advance(2)
        wait_for(lambda: _phase(core, "default", "ticks") == "Running", what="Running")
        clock.advance(50)
        time.sleep(0.2)
        assert _phase(core, "default", "ticks") == "Running"
        clock.advance(60)
        wait_for(lambda: _phase(core, "default", "ticks") == "Succeeded", what="Succeeded")


def test_cluster_file_defines_pools_labels_and_taints(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "tolerationSeconds": 5,
                "pools": [
                    {
                        "name": "l40s",
                        "count": 2,
                        "gpuProduct": "NVIDIA-L40S",
                        "gpusPerNode": 4,
                        "cpu": "32",
                        "memory": "256Gi",
                        "rack": "r9",
                        "nvlinkDomain": "nvl-1",
                        "labels": {"tier": "inference"},
                        "taints": [{"key": "gpu", "value": "l40s", "effect": "NoSchedule"}],
                    },
                    {"name": "cpu", "count": 1, "cpu": "64", "memory": "128Gi"},
                ],
            }
        )
    )
    with KubeSim(cluster=path) as sim:
        config = client.Configuration()
        config.host = sim.url
        nodes = {
            n.metadata.name: n for n in client.CoreV1Api(client.ApiClient(config)).list_node().items
        }
    assert sorted(nodes) == ["cpu-0", "l40s-0", "l40s-1"]
    gpu = nodes["l40s-1"]
    assert gpu.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"
    assert gpu.metadata.labels["nvidia.com/gpu.clique"] == "nvl-1"
    assert (
        gpu.metadata.labels["tier"] == "inference"
        and gpu.metadata.labels["topology.kubernetes.io/zone"] == "r9"
    )
    assert gpu.status.capacity["nvidia.com/gpu"] == "4" and gpu.status.capacity["cpu"] == "32"
    assert gpu.spec.taints[0].key == "gpu"
    assert "nvidia.com/gpu" not in nodes["cpu-0"].status.capacity


@pytest.mark.parametrize(
    ("start_s", "pending_after", "running_after"), [(5.0, 4.0, 1.5), (0.0, 0.0, 0.0)]
)
def test_cluster_file_sets_how_long_a_container_takes_to_start(
    tmp_path: Path, start_s: float, pending_after: float, running_after: float
) -> None:
    path = tmp_path / "cluster.yaml"
    pool = {"name": "g", "count": 1, "gpuProduct": "NVIDIA-L40S", "gpusPerNode": 4}
    path.write_text(yaml.safe_dump({"containerStartSeconds": start_s, "pools": [pool]}))
    clock = ManualClock()
    with KubeSim(cluster=path, clock=clock) as sim:
        core = _bound_pod(sim, "starts")
        if pending_after:
            clock.advance(pending_after)
            time.sleep(0.2)
            assert _phase(core, "default", "starts") == "Pending"
        clock.advance(running_after)
        wait_for(lambda: _phase(core, "default", "starts") == "Running", what="Running")


def test_a_negative_container_start_is_refused_naming_the_field() -> None:
    from kubesim.cluster import parse_cluster

    pool = {"name": "g", "count": 1, "gpusPerNode": 4}
    with pytest.raises(ValueError, match=r"containerStartSeconds: -1.0 is not within 0\.\.3600"):
        parse_cluster({"containerStartSeconds": -1, "pools": [pool]})
