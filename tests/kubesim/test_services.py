"""Services: headless ones give an Indexed Job's pods DNS names; owned ones go with their Job."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import job_manifest, wait_for


def _headless(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"clusterIP": "None", "selector": selector, "ports": [{"port": 29500}]},
    }


def test_a_headless_service_is_served_with_its_defaults(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_service(namespace, _headless("peers", {"app": "x"}))
    service = core.read_namespaced_service("peers", namespace)
    assert (service.spec.type, service.spec.cluster_ip, service.spec.cluster_ips) == (
        "ClusterIP",
        "None",
        ["None"],
    )
    assert (service.spec.ports[0].protocol, service.spec.ports[0].target_port) == ("TCP", 29500)
    assert [s.metadata.name for s in core.list_namespaced_service(namespace).items] == ["peers"]


def test_a_service_with_an_address_gets_one_from_the_service_range(
    core: client.CoreV1Api, namespace: str
) -> None:
    manifest = _headless("web", {"app": "web"})
    del manifest["spec"]["clusterIP"]
    service = core.create_namespaced_service(namespace, manifest)
    assert service.spec.cluster_ip.startswith("10.96.")


def test_a_service_name_must_be_a_dns_label_starting_with_a_letter(
    core: client.CoreV1Api, namespace: str
) -> None:
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_service(namespace, _headless("1-peers", {"app": "x"}))
    assert caught.value.status == 422
    assert "RFC 1035 label" in json.loads(caught.value.body)["message"]


def test_a_pods_subdomain_must_be_a_dns_label(batch: client.BatchV1Api, namespace: str) -> None:
    manifest = job_manifest("sub", pod={"subdomain": "Not_A_Label"})
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(namespace, manifest)
    body = json.loads(caught.value.body)
    assert caught.value.status == 422
    assert body["details"]["causes"][0]["field"] == "spec.template.spec.subdomain"


def test_an_indexed_jobs_pods_get_hostname_and_subdomain_of_the_service(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    manifest = job_manifest(
        "ddp",
        runtime=600,
        completionMode="Indexed",
        completions=2,
        parallelism=2,
        pod={"subdomain": "ddp"},
    )
    job = batch.create_namespaced_job(namespace, manifest)
    service = _headless("ddp", {"batch.kubernetes.io/job-name": "ddp"})
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "ddp", "uid": job.metadata.uid}
    service["metadata"]["ownerReferences"] = [owner]
    core.create_namespaced_service(namespace, service)
    pods = wait_for(
        lambda: len(items := core.list_namespaced_pod(namespace).items) == 2 and items,
        what="two pods",
    )
    names = sorted(f"{p.spec.hostname}.{p.spec.subdomain}.{namespace}.svc" for p in pods)
    assert names == [f"ddp-{i}.ddp.{namespace}.svc" for i in range(2)]
    assert all(p.metadata.labels["batch.kubernetes.io/job-name"] == "ddp" for p in pods)

    batch.delete_namespaced_job("ddp", namespace, propagation_policy="Background")
    wait_for(lambda: not core.list_namespaced_service(namespace).items, what="service deleted")
