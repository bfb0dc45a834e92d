"""Every verb through the official client, with the real API server's answers and errors."""

from __future__ import annotations

import json
import urllib.request

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim import KubeSim
from tests.kubesim.conftest import job_manifest, pod_manifest, wait_for


def _error(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_created_objects_carry_server_metadata(core: client.CoreV1Api, namespace: str) -> None:
    pod = core.create_namespaced_pod(namespace, pod_manifest("meta"))
    assert pod.metadata.uid and pod.metadata.creation_timestamp is not None
    assert int(pod.metadata.resource_version) > 0
    assert pod.spec.restart_policy == "Always" and pod.spec.scheduler_name == "default-scheduler"
    assert pod.status.phase == "Pending" and pod.status.qos_class == "BestEffort"


def test_generate_name_gets_a_random_suffix(core: client.CoreV1Api, namespace: str) -> None:
    pod = core.create_namespaced_pod(
        namespace, {"metadata": {"generateName": "gen-"}, "spec": pod_manifest("x")["spec"]}
    )
    assert pod.metadata.name.startswith("gen-") and len(pod.metadata.name) == 9


def test_missing_object_is_not_found_status(core: client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("nope", namespace)
    body = _error(caught.value)
    assert caught.value.status == 404 and body["reason"] == "NotFound" and body["kind"] == "Status"
    assert body["message"] == 'pods "nope" not found'


def test_second_create_is_already_exists(batch: client.BatchV1Api, namespace: str) -> None:
    batch.create_namespaced_job(namespace, job_manifest("twice"))
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(namespace, job_manifest("twice"))
    assert caught.value.status == 409 and _error(caught.value)["reason"] == "AlreadyExists"
    assert _error(caught.value)["message"] == 'jobs.batch "twice" already exists'


def test_create_in_missing_namespace_is_not_found(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("no-such-ns", pod_manifest("x"))
    assert (
        caught.value.status == 404
        and _error(caught.value)["message"] == 'namespaces "no-such-ns" not found'
    )


def test_update_with_stale_resource_version_conflicts(
    core: client.CoreV1Api, namespace: str
) -> None:
    body = {"metadata": {"name": "lr"}, "spec": {"limits": [{"type": "Container"}]}}
    created = core.create_namespaced_limit_range(namespace, body)
    created.metadata.labels = {"a": "1"}
    updated = core.replace_namespaced_limit_range("lr", namespace, created)
    assert updated.metadata.labels == {"a": "1"}
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    created.metadata.labels = {"a": "2"}
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_limit_range("lr", namespace, created)
    assert caught.value.status == 409 and _error(caught.value)["reason"] == "Conflict"


def test_invalid_job_lists_causes(batch: client.BatchV1Api, namespace: str) -> None:
    bad = job_manifest("bad", restartPolicy="Always")
    bad["spec"]["template"]["spec"]["containers"][0].pop("image")
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(namespace, bad)
    body = _error(caught.value)
    assert caught.value.status == 422 and body["reason"] == "Invalid"
    fields = {c["field"] for c in body["details"]["causes"]}
    assert fields == {"spec.template.spec.containers[0].image", "spec.template.spec.restartPolicy"}


def test_merge_and_strategic_patches_merge_labels_and_containers(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("patch"))
    core.patch_namespaced_pod("patch", namespace, {"metadata": {"labels": {"x": "1"}}})
    patched = core.patch_namespaced_pod(
        "patch", namespace, {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}
    )
    assert patched.metadata.labels == {"x": "1"}
    assert [(c.name, c.image) for c in patched.spec.containers] == [("main", "busybox:1.37")]
    assert patched.spec.containers[0].termination_message_path == "/dev/termination-log"


def test_json_patch_applies_operations(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_manifest("jsonpatch"))
    patched = core.patch_namespaced_pod(
        "jsonpatch", namespace, [{"op": "add", "path": "/metadata/labels", "value": {"team": "a"}}]
    )
    assert patched.metadata.labels == {"team": "a"}


def test_status_is_written_only_through_the_status_subresource(
    batch: client.BatchV1Api, namespace: str
) -> None:
    batch.create_namespaced_job(namespace, job_manifest("st", suspend=True))
    ignored = batch.patch_namespaced_job("st", namespace, {"status": {"failed": 9}})
    assert ignored.status.failed is None
    written = batch.patch_namespaced_job_status("st", namespace, {"status": {"failed": 9}})
    assert written.status.failed == 9


def test_delete_collection_removes_matching_objects(core: client.CoreV1Api, namespace: str) -> None:
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        body = pod_manifest(name)
        body["metadata"]["labels"] = {"tier": tier}
        core.create_namespaced_pod(namespace, body)
    core.delete_collection_namespaced_pod(namespace, label_selector="tier=x")

    def remaining() -> set[str] | None:
        names = {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
        return names if names == {"c"} else None

    assert wait_for(remaining, what="graceful deletion") == {"c"}


def test_bearer_token_is_required_when_configured() -> None:
    with KubeSim(token="s3cret") as sim:
        config = client.Configuration()
        config.host = sim.url
        with pytest.raises(ApiException) as caught:
            client.CoreV1Api(client.ApiClient(config)).list_node()
        assert caught.value.status == 401
        config.api_key = {"authorization": "s3cret"}
        config.api_key_prefix = {"authorization": "Bearer"}
        assert len(client.CoreV1Api(client.ApiClient(config)).list_node().items) == 12


def test_every_served_object_deserialises_into_client_models(
    sim: KubeSim, api_client: client.ApiClient, batch: client.BatchV1Api, namespace: str
) -> None:
    batch.create_namespaced_job(namespace, job_manifest("models", runtime=1))
    wait_for(
        lambda: batch.read_namespaced_job("models", namespace).status.succeeded, what="job done"
    )
    models = {
        "pods": "V1PodList",
        "nodes": "V1NodeList",
        "namespaces": "V1NamespaceList",
        "events": "CoreV1EventList",
        "jobs.batch": "V1JobList",
        "priorityclasses.scheduling.k8s.io": "V1PriorityClassList",
        "serviceaccounts": "V1ServiceAccountList",
    }
    checked = 0
    for key, model in models.items():
        with urllib.request.urlopen(f"{sim.url}{_collection_path(key)}") as response:
            text = response.read().decode()
        assert json.loads(text)["items"], key
        typed = api_client.deserialize(text, model, "application/json")
        for item in typed.items:
            assert item.metadata.uid and item.metadata.creation_timestamp is not None
            assert item.metadata.resource_version
            checked += 1
    assert checked > 20


def _collection_path(key: str) -> str:
    plural, _, group = key.partition(".")
    return f"/apis/{group}/v1/{plural}" if group else f"/api/v1/{plural}"
