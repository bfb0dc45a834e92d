"""One kubesim per test module, on a fast clock, and the official client pointed at it."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client

from kubesim import KubeSim

T = TypeVar("T")
SPEED = 40.0
_names = itertools.count()


def wait_for(probe: Callable[[], T | None], timeout: float = 10.0, what: str = "condition") -> T:
    """Poll until `probe` returns something truthy; fail loudly otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=SPEED) as running:
        yield running


@pytest.fixture(scope="module")
def api_client(sim: KubeSim) -> client.ApiClient:
    config = client.Configuration()
    config.host = sim.url
    return client.ApiClient(config)


@pytest.fixture(scope="module")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def batch(api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"t{next(_names)}-{int(time.time() * 1000) % 100000}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def job_manifest(
    name: str, runtime: float = 2, gpus: int = 1, exit_code: int = 0, **spec: Any
) -> dict[str, Any]:
    annotations = {
        "kubesim.io/runtime-seconds": str(runtime),
        "kubesim.io/exit-code": str(exit_code),
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": spec.pop("restartPolicy", "Never"),
        "containers": [
            {
                "name": "train",
                "image": "ghcr.io/acme/train:1.0",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    pod_spec.update(spec.pop("pod", {}))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"annotations": annotations}, "spec": pod_spec}, **spec},
    }


def pod_manifest(
    name: str, gpus: int = 0, runtime: float | None = None, **spec: Any
) -> dict[str, Any]:
    annotations = {} if runtime is None else {"kubesim.io/runtime-seconds": str(runtime)}
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1.36", "resources": resources}],
            **spec,
        },
    }
