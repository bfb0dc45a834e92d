"""GPU → pod from the kubelet's pod-resources API: kubesim's gRPC socket, read by the agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from agent.core import Agent
from agent.podresources import PodResources, WireError, fields, gpu_pods
from kubesim import KubeSim
from kubesim.podresources import PodDevices, encode_list_response
from tests.kubesim.conftest import pod_manifest, wait_for

NODE = "h100-a-0"


class Recorder:
    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []

    def post(self, batch: dict[str, Any]) -> None:
        self.batches.append(json.loads(json.dumps(batch)))


def test_the_wire_format_round_trips_and_other_resources_are_ignored() -> None:
    pods = [
        PodDevices("gpu-vision", "job-7-1-0-abcde", "main", ("GPU-a", "GPU-b")),
        PodDevices("gpu-nlp", "job-9-2-0-fghij", "main", ("GPU-c",)),
    ]
    response = encode_list_response(pods) + encode_list_response(
        [PodDevices("kube-system", "nic-plugin", "main", ("mlx5_0",))], resource="rdma/hca"
    )
    assert gpu_pods(response) == {
        "GPU-a": "gpu-vision/job-7-1-0-abcde",
        "GPU-b": "gpu-vision/job-7-1-0-abcde",
        "GPU-c": "gpu-nlp/job-9-2-0-fghij",
    }
    assert gpu_pods(b"") == {}


def test_truncated_bytes_are_refused_not_misread() -> None:
    whole = encode_list_response([PodDevices("ns", "pod", "main", ("GPU-a",))])
    with pytest.raises(WireError):
        list(fields(whole[:-3]))


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=20.0) as running:
        yield running
        running.stop_pod_resources()


def test_the_agent_labels_each_gpu_with_the_pod_kubesim_gave_it(
    sim: KubeSim, tmp_path: Path
) -> None:
    config = client.Configuration()
    config.host = sim.url
    core = client.CoreV1Api(client.ApiClient(config))
    core.create_namespace({"metadata": {"name": "gpu-vision"}})
    core.create_namespaced_pod(
        "gpu-vision", pod_manifest("trainer", gpus=3, nodeName=NODE, runtime=600)
    )
    socket = sim.pod_resources_socket(NODE, tmp_path)
    pods = PodResources(socket)
    owners = wait_for(lambda: pods.gpu_pods() or None, what="the pod's GPUs")
    assert set(owners.values()) == {"gpu-vision/trainer"} and len(owners) == 3

    recorder = Recorder()
    agent = Agent(NODE, recorder, library=sim.nvml_library(NODE), pod_resources=pods)
    agent.open()
    try:
        samples = agent.sample_once()
    finally:
        agent.close()
    held = {s["uuid"] for s in samples if s["pod"] == "gpu-vision/trainer"}
    assert held == set(owners) and all(s["pod"] == "" for s in samples if s["uuid"] not in held)


def test_without_an_answering_socket_samples_carry_no_pod(sim: KubeSim, tmp_path: Path) -> None:
    assert PodResources.if_present(str(tmp_path / "absent.sock")) is None
    silent = PodResources(str(tmp_path / "nobody-listens.sock"), timeout_s=0.2)
    agent = Agent(NODE, Recorder(), library=sim.nvml_library(NODE), pod_resources=silent)
    agent.open()
    try:
        samples = agent.sample_once()
    finally:
        agent.close()
    assert samples and all("pod" not in s for s in samples)
