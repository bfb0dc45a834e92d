"""Scheduler and admission: GPU fit, selectors, taints, affinity, quota and priority."""

from __future__ import annotations

import json
import re
from functools import partial

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import job_manifest, pod_manifest, wait_for


def _node_of(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, namespace).spec.node_name


def test_gpu_pods_land_on_gpu_nodes_with_room(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("g8", gpus=8))
    node = wait_for(lambda: _node_of(core, namespace, "g8"), what="binding")
    labels = core.read_node(node).metadata.labels
    assert labels["nvidia.com/gpu.count"] == "8"


def test_pod_asking_more_gpus_than_any_node_is_unschedulable(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("g9", gpus=9))

    def failed_event() -> list[client.CoreV1Event]:
        return [
            e for e in core.list_namespaced_event(namespace).items if e.reason == "FailedScheduling"
        ]

    (event,) = wait_for(failed_event, what="FailedScheduling")
    assert (
        event.type == "Warning"
        and event.message == "0/12 nodes are available: 12 Insufficient nvidia.com/gpu."
    )
    pod = core.read_namespaced_pod("g9", namespace)
    scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert scheduled.status == "False" and scheduled.reason == "Unschedulable"


def test_node_selector_picks_the_gpu_product(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(
        namespace,
        pod_manifest(
            "a100", gpus=1, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
        ),
    )
    node = wait_for(lambda: _node_of(core, namespace, "a100"), what="binding")
    assert node.startswith("a100-")


def test_match_fields_pins_a_pod_to_a_named_node(core: client.CoreV1Api, namespace: str) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["h100-b-2"]}
                        ]
                    }
                ]
            }
        }
    }
    core.create_namespaced_pod(namespace, pod_manifest("pinned", gpus=1, affinity=affinity))
    assert wait_for(lambda: _node_of(core, namespace, "pinned"), what="binding") == "h100-b-2"


def test_match_expressions_in_and_not_in(core: client.CoreV1Api, namespace: str) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["rack-b", "rack-c"],
                            },
                            {
                                "key": "nvidia.com/gpu.family",
                                "operator": "NotIn",
                                "values": ["ampere"],
                            },
                            {"key": "nvidia.com/gpu.present", "operator": "Exists"},
                        ]
                    }
                ]
            }
        }
    }
    core.create_namespaced_pod(namespace, pod_manifest("rackb", gpus=1, affinity=affinity))
    assert wait_for(lambda: _node_of(core, namespace, "rackb"), what="binding").startswith(
        "h100-b-"
    )


def test_anti_affinity_on_hostname_spreads_pods(core: client.CoreV1Api, namespace: str) -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "spread"}},
                }
            ]
        }
    }
    for i in range(3):
        body = pod_manifest(f"s{i}", gpus=1, affinity=anti)
        body["metadata"]["labels"] = {"app": "spread"}
        core.create_namespaced_pod(namespace, body)
    nodes = [
        wait_for(partial(_node_of, core, namespace, f"s{i}"), what="binding") for i in range(3)
    ]
    assert len(set(nodes)) == 3


def test_cordoned_and_tainted_nodes_are_avoided(core: client.CoreV1Api, namespace: str) -> None:
    core.patch_node("a100-c-0", {"spec": {"unschedulable": True}})
    core.patch_node(
        "a100-c-1", {"spec": {"taints": [{"key": "maint", "value": "yes", "effect": "NoSchedule"}]}}
    )
    try:
        pin = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {
                                    "key": "metadata.name",
                                    "operator": "In",
                                    "values": ["a100-c-0", "a100-c-1"],
                                }
                            ]
                        }
                    ]
                }
            }
        }
        core.create_namespaced_pod(namespace, pod_manifest("blocked", affinity=pin))
        tolerating = pod_manifest(
            "tolerant",
            affinity=pin,
            tolerations=[
                {"key": "maint", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}
            ],
        )
        core.create_namespaced_pod(namespace, tolerating)
        assert wait_for(lambda: _node_of(core, namespace, "tolerant"), what="binding") == "a100-c-1"
        event = wait_for(
            lambda: [
                e
                for e in core.list_namespaced_event(namespace).items
                if e.reason == "FailedScheduling"
            ],
            what="FailedScheduling",
        )[0]
        assert "1 node(s) were unschedulable" in event.message
        assert "1 node(s) had untolerated taint {maint: yes}" in event.message
    finally:
        core.patch_node("a100-c-0", {"spec": {"unschedulable": None}})
        core.patch_node("a100-c-1", {"spec": {"taints": None}})


def test_quota_rejects_pods_beyond_the_gpu_limit(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_resource_quota(
        namespace,
        {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}},
    )
    core.create_namespaced_pod(namespace, pod_manifest("q1", gpus=3))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, pod_manifest("q2", gpus=2))
    body = json.loads(caught.value.body)
    assert caught.value.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        'pods "q2" is forbidden: exceeded quota: gpus, requested: '
        "requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=3, "
        "limited: requests.nvidia.com/gpu=4"
    )
    used = wait_for(
        lambda: (
            (core.read_namespaced_resource_quota("gpus", namespace).status.used or {}).get(
                "requests.nvidia.com/gpu"
            )
            == "3"
        ),
        what="quota status",
    )
    assert used


def test_quota_on_job_count(
    batch: client.BatchV1Api, core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": "jobs"}, "spec": {"hard": {"count/jobs.batch": "1"}}}
    )
    batch.create_namespaced_job(namespace, job_manifest("j1", suspend=True))
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(namespace, job_manifest("j2", suspend=True))
    assert "exceeded quota: jobs" in json.loads(caught.value.body)["message"]


def test_job_pods_blocked_by_quota_are_reported_as_failed_create(
    batch: client.BatchV1Api, core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_resource_quota(
        namespace,
        {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}},
    )
    batch.create_namespaced_job(namespace, job_manifest("big", gpus=2))
    event = wait_for(
        lambda: [
            e for e in core.list_namespaced_event(namespace).items if e.reason == "FailedCreate"
        ],
        what="FailedCreate",
    )[0]
    assert re.fullmatch(
        r'Error creating: pods "big-\w{5}" is forbidden: exceeded quota: gpus, '
        r"requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, "
        r"limited: requests.nvidia.com/gpu=1",
        event.message,
    )


def test_priority_class_sets_pod_priority(
    core: client.CoreV1Api, api_client: client.ApiClient, namespace: str
) -> None:
    scheduling = client.SchedulingV1Api(api_client)
    if not any(p.metadata.name == "high" for p in scheduling.list_priority_class().items):
        scheduling.create_priority_class({"metadata": {"name": "high"}, "value": 1000})
    pod = core.create_namespaced_pod(namespace, pod_manifest("prio", priorityClassName="high"))
    assert pod.spec.priority == 1000
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, pod_manifest("nope", priorityClassName="missing"))
    assert caught.value.status == 403


def test_limit_range_defaults_container_resources(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_limit_range(
        namespace,
        {
            "metadata": {"name": "defaults"},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": {"cpu": "2", "memory": "4Gi"},
                        "defaultRequest": {"cpu": "1", "memory": "2Gi"},
                    }
                ]
            },
        },
    )
    pod = core.create_namespaced_pod(namespace, pod_manifest("lr"))
    resources = pod.spec.containers[0].resources
    assert resources.limits == {"cpu": "2", "memory": "4Gi"} and resources.requests == {
        "cpu": "1",
        "memory": "2Gi",
    }
