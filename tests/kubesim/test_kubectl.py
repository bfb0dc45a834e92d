"""kubectl against kubesim with nothing but the kubeconfig: the commands operators really use."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from kubesim import KubeSim
from tests.kubesim.conftest import wait_for

Kubectl = Callable[..., str]
KUBECTL = shutil.which("kubectl") or str(Path(sys.executable).with_name("kubectl"))

JOB_YAML = """
apiVersion: batch/v1
kind: Job
metadata: {name: %(name)s, namespace: %(ns)s}
spec:
  template:
    metadata: {annotations: {kubesim.io/runtime-seconds: "%(runtime)s"}}
    spec:
      restartPolicy: Never
      containers:
      - {name: train, image: "pytorch:2.4", resources: {limits: {nvidia.com/gpu: "1"}}}
"""


@pytest.fixture(scope="module")
def kubeconfig(sim: KubeSim, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sim.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")


@pytest.fixture
def kubectl(kubeconfig: Path) -> Iterator[Kubectl]:
    def run(*args: str, check: bool = True, timeout: float = 30, stdin: str | None = None) -> str:
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done.stdout + done.stderr

    yield run


def _apply_job(kubectl: Kubectl, namespace: str, name: str, runtime: int) -> str:
    manifest = JOB_YAML % {"name": name, "ns": namespace, "runtime": runtime}
    return kubectl("apply", "-f", "-", stdin=manifest)


def test_get_nodes_wide_shows_status_and_ips(kubectl: Kubectl) -> None:
    out = kubectl("get", "nodes", "-o", "wide")
    header, *rows = out.splitlines()
    assert (
        header.split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
        and "INTERNAL-IP" in header
    )
    assert len(rows) == 12 and all(" Ready " in row and "10.0.0." in row for row in rows)


def test_apply_creates_then_configures_a_job(kubectl: Kubectl, namespace: str) -> None:
    assert "job.batch/applied created" in _apply_job(kubectl, namespace, "applied", 600)
    assert "job.batch/applied configured" in _apply_job(kubectl, namespace, "applied", 601)
    assert "applied" in kubectl("get", "jobs", "-n", namespace)


def test_wait_for_complete_returns_when_the_job_finishes(kubectl: Kubectl, namespace: str) -> None:
    _apply_job(kubectl, namespace, "waited", 3)
    out = kubectl(
        "wait", "--for=condition=complete", "job/waited", "-n", namespace, "--timeout=20s"
    )
    assert "job.batch/waited condition met" in out


def test_logs_follow_streams_until_the_container_exits(
    kubectl: Kubectl, core: client.CoreV1Api, namespace: str
) -> None:
    _apply_job(kubectl, namespace, "logged", 4)
    wait_for(
        lambda: [
            p for p in core.list_namespaced_pod(namespace).items if p.status.phase == "Running"
        ],
        what="Running",
    )
    out = kubectl("logs", "-f", "job/logged", "-n", namespace)
    assert "step=2 loss=" in out and out.rstrip().endswith("training finished")


def test_get_pods_watch_prints_phase_changes(kubectl: Kubectl, namespace: str) -> None:
    _apply_job(
        kubectl, namespace, "watched", 60
    )  # 1.5 s at SPEED: kubectl starts well before the end
    out = kubectl("get", "pods", "-w", "-n", namespace, "--request-timeout=5s", check=False)
    lines = [line for line in out.splitlines() if line.startswith("watched-")]
    assert any("Running" in line for line in lines) and any("Completed" in line for line in lines)


def test_describe_shows_events(kubectl: Kubectl, namespace: str) -> None:
    _apply_job(kubectl, namespace, "described", 600)
    out = wait_for(
        lambda: (
            (text := kubectl("describe", "pod", "-n", namespace))
            and "Started container train" in text
            and text
        ),
        what="events in describe",
    )
    assert "Successfully assigned" in out and "nvidia.com/gpu:  1" in out


def test_cordon_uncordon_and_drain(
    kubectl: Kubectl, core: client.CoreV1Api, namespace: str
) -> None:
    node = "a100-c-3"
    assert "cordoned" in kubectl("cordon", node)
    assert core.read_node(node).spec.unschedulable is True
    assert "SchedulingDisabled" in kubectl("get", "node", node)
    assert "uncordoned" in kubectl("uncordon", node)
    assert not core.read_node(node).spec.unschedulable
    body = {
        "metadata": {"name": "drained"},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox:1.36"}]},
    }
    core.create_namespaced_pod(namespace, body)
    wait_for(
        lambda: core.read_namespaced_pod("drained", namespace).status.phase == "Running",
        what="Running",
    )
    out = kubectl("drain", node, "--ignore-daemonsets", "--force", "--timeout=30s")
    assert f"node/{node} drained" in out and "evicting pod" in out
    assert core.list_namespaced_pod(namespace, field_selector=f"spec.nodeName={node}").items == []
    kubectl("uncordon", node)


def test_delete_removes_the_job_and_its_pods(
    kubectl: Kubectl, core: client.CoreV1Api, namespace: str
) -> None:
    _apply_job(kubectl, namespace, "doomed", 600)
    wait_for(lambda: core.list_namespaced_pod(namespace).items, what="pod")
    assert 'job.batch "doomed" deleted' in kubectl("delete", "job", "doomed", "-n", namespace)
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, what="pods gone")
