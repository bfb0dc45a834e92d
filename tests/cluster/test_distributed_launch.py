"""A multi-pod job's rendezvous: headless Service, pod DNS names, torchrun's environment and a
NetworkPolicy for its own pods, created with its Job and deleted with it (through kubesim)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from kubernetes import client

from cluster.backend import Obj, Unavailable
from cluster.manifests import INDEX_ANNOTATION, LABEL_JOB, pod_address
from jobs.actions import cancel_job
from jobs.models import Job, State
from tests.cluster.conftest import Cluster

pytestmark = pytest.mark.django_db(transaction=True)
NAMESPACE = "gpu-vision"
FIELD = re.compile(r"^metadata\.annotations\['(.+)'\]$")


def _running_pods(cluster: Cluster, job: Job) -> list[Obj]:
    pods = cluster.backend.list("pods", f"{LABEL_JOB}={job.pk}").items
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    return running if len(running) == job.nodes else []


def _env(pod: Obj) -> dict[str, str]:
    """The container's variables as the kubelet resolves them (the downward API included)."""
    resolved = {}
    for var in pod["spec"]["containers"][0]["env"]:
        if "value" in var:
            resolved[var["name"]] = var["value"]
        else:
            match = FIELD.match(var["valueFrom"]["fieldRef"]["fieldPath"])
            assert match is not None, var
            resolved[var["name"]] = pod["metadata"]["annotations"][match.group(1)]
    return resolved


def _selects(selector: dict[str, Any], pod: Obj) -> bool:
    labels = pod["metadata"]["labels"]
    return all(labels.get(k) == v for k, v in selector.items())


def _services(cluster: Cluster) -> list[Any]:
    return cluster.backend.core.list_namespaced_service(NAMESPACE).items


def _policies(cluster: Cluster) -> dict[str, Any]:
    listed = client.NetworkingV1Api(cluster.backend.api).list_namespaced_network_policy(NAMESPACE)
    return {str(p.metadata.name): p for p in listed.items}


def test_a_four_node_jobs_pods_carry_the_rendezvous_and_resolvable_names(
    cluster: Cluster,
) -> None:
    job = cluster.submit(runtime_s=3600, nodes=4, gpus_per_node=2)
    cluster.drive(lambda: bool(_running_pods(cluster, job)) and len(_services(cluster)) == 1)
    job.refresh_from_db()
    name, pods = job.k8s_name, _running_pods(cluster, job)
    [service] = _services(cluster)
    assert (service.metadata.name, service.spec.cluster_ip) == (name, "None")
    assert service.spec.publish_not_ready_addresses is True

    master = f"{name}-0.{name}.{NAMESPACE}.svc"
    addresses = set()
    for pod in pods:
        env, index = _env(pod), pod["metadata"]["annotations"][INDEX_ANNOTATION]
        assert env["RANK"] == env["NODE_RANK"] == env["PET_NODE_RANK"] == index
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == master
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29500"
        assert (env["WORLD_SIZE"], env["NNODES"], env["LOCAL_WORLD_SIZE"]) == ("8", "4", "2")
        assert env["PET_NPROC_PER_NODE"] == "2"
        spec = pod["spec"]
        assert (spec["hostname"], spec["subdomain"]) == (f"{name}-{index}", service.metadata.name)
        assert _selects(service.spec.selector, pod)  # so the Service's DNS lists this pod
        addresses.add(f"{spec['hostname']}.{spec['subdomain']}.{pod['metadata']['namespace']}.svc")
    assert addresses == {pod_address(job, i) for i in range(4)}
    assert master in addresses


def test_a_jobs_policy_lets_its_own_pods_reach_each_other_and_nothing_else(
    cluster: Cluster,
) -> None:
    job = cluster.submit(runtime_s=3600, nodes=2, gpus_per_node=1)
    other = cluster.submit(runtime_s=3600, nodes=2, gpus_per_node=1)
    cluster.drive(lambda: all(_running_pods(cluster, j) for j in (job, other)))
    cluster.drive(lambda: len(_policies(cluster)) == 3)
    job.refresh_from_db()
    policy = _policies(cluster)[f"{job.k8s_name}-peers"]
    selector = policy.spec.pod_selector.match_labels
    assert [_selects(selector, p) for p in _running_pods(cluster, job)] == [True, True]
    assert not any(_selects(selector, p) for p in _running_pods(cluster, other))
    [ingress] = policy.spec.ingress
    assert [peer.pod_selector.match_labels for peer in ingress._from] == [selector]
    assert ingress._from[0].namespace_selector is None  # this namespace only
    to_peers, to_dns = policy.spec.egress
    assert [peer.pod_selector.match_labels for peer in to_peers.to] == [selector]
    assert {(p.protocol, p.port) for p in to_dns.ports} == {("UDP", 53), ("TCP", 53)}
    assert to_dns.to[0].pod_selector.match_labels == {"k8s-app": "kube-dns"}


def test_the_service_and_policy_go_with_the_job(cluster: Cluster) -> None:
    job = cluster.submit(runtime_s=3600, nodes=2, gpus_per_node=1)
    cluster.drive(lambda: len(_services(cluster)) == 1 and len(_policies(cluster)) == 2)
    cancel_job(job, acting_user=cluster.world.bob)
    cluster.drive(lambda: not _services(cluster) and list(_policies(cluster)) == ["default-deny"])
    assert cluster.state(job) == State.CANCELLED


def test_a_single_pod_job_gets_no_service_and_no_rendezvous(cluster: Cluster) -> None:
    job = cluster.submit(runtime_s=3600, gpus_per_node=2)
    cluster.drive(lambda: bool(_running_pods(cluster, job)))
    [pod] = _running_pods(cluster, job)
    assert "MASTER_ADDR" not in _env(pod) and "subdomain" not in pod["spec"]
    assert _services(cluster) == []


def test_a_service_that_could_not_be_created_is_created_at_the_next_reconciliation(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply, failed = cluster.backend.apply, list[str]()

    def failing_once(obj: Obj) -> None:
        if obj["kind"] == "Service" and not failed:
            failed.append(obj["metadata"]["name"])
            raise Unavailable("cluster API: connection refused")
        apply(obj)

    monkeypatch.setattr(cluster.backend, "apply", failing_once)
    job = cluster.submit(runtime_s=3600, nodes=2, gpus_per_node=1)
    cluster.drive(lambda: bool(failed) and cluster.state(job) == State.RUNNING)
    cluster.drive(lambda: [s.metadata.name for s in _services(cluster)] == failed)
    assert failed == [job.k8s_name]
