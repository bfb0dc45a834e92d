"""Jobs through the real Kubernetes client against kubesim: from the queue to their end."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from cluster.manifests import LABEL_JOB
from cluster.models import JobLogChunk, Node
from jobs.models import Job, State
from tests.cluster.conftest import FAST, Cluster, audited, blocked

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_provisions_team_namespaces_with_quota_and_policy(cluster: Cluster) -> None:
    cluster.drive(lambda: Node.objects.count() == 12)
    core = cluster.backend.core
    namespace = core.read_namespace("gpu-vision")
    assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
    quota = core.read_namespaced_resource_quota("gpu-quota", "gpu-vision")
    assert quota.spec.hard == {"requests.nvidia.com/gpu": "32"}
    assert (
        core.read_namespaced_service_account(
            "default", "gpu-vision"
        ).automount_service_account_token
        is False
    )
    from kubernetes import client

    policies = client.NetworkingV1Api(cluster.backend.api).list_namespaced_network_policy(
        "gpu-vision"
    )
    assert [p.metadata.name for p in policies.items] == ["default-deny"]


def test_quota_change_reaches_the_namespace(cluster: Cluster) -> None:
    from quotas.actions import set_quota

    cluster.drive(lambda: Node.objects.count() == 12)
    set_quota(
        cluster.world.vision,
        cluster.world.h100,
        guaranteed=8,
        limit=24,
        acting_user=cluster.world.admin,
    )
    core = cluster.backend.core
    cluster.drive(
        lambda: (
            core.read_namespaced_resource_quota("gpu-quota", "gpu-vision").spec.hard[
                "requests.nvidia.com/gpu"
            ]
            == "24"
        )
    )


def test_single_node_job_succeeds_with_its_log_kept(cluster: Cluster) -> None:
    job = cluster.submit(runtime_s=3)
    cluster.drive(lambda: cluster.state(job) == State.SUCCEEDED)
    steps = [e.to_state for e in job.events.all()]
    assert steps == ["QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED"]
    vision = cluster.world.vision.pk
    assert audited(job) == [
        ("job.submit", vision),
        ("job.admit", vision),
        ("job.running", vision),
        ("job.succeeded", vision),
    ]
    pods = cluster.backend.list("pods", f"{LABEL_JOB}={job.pk}").items
    assert [p["metadata"]["namespace"] for p in pods] == ["gpu-vision"]
    cluster.drive(lambda: JobLogChunk.objects.for_team(job.team).filter(job=job).exists())
    text = "\n".join(
        JobLogChunk.objects.for_team(job.team).filter(job=job).values_list("text", flat=True)
    )
    assert "step=1 loss=" in text


def test_multi_node_job_runs_one_pod_per_node(cluster: Cluster) -> None:
    # Long enough that RUNNING is seen however slowly the controller steps: a short job could
    # start and end between two of its turns on a loaded machine. The clock then skips its end.
    job = cluster.submit(runtime_s=600, nodes=2, gpus_per_node=8)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    assert len(job.placement) == 2 and set(job.placement.values()) == {8}

    def bound() -> list[str]:  # RUNNING comes with the first pod; the second may bind later
        pods = cluster.backend.list("pods", f"{LABEL_JOB}={job.pk}").items
        return sorted(p["spec"].get("nodeName") or "" for p in pods)

    cluster.drive(lambda: len(bound()) == 2 and all(bound()))
    assert bound() == sorted(job.placement)
    cluster.clock.advance(600)
    cluster.drive(lambda: cluster.state(job) == State.SUCCEEDED)


def test_failure_keeps_the_exit_code(cluster: Cluster) -> None:
    job = cluster.submit(runtime_s=1, exit_code=3)
    cluster.drive(lambda: cluster.state(job) == State.FAILED)
    assert job.exit_code == 3 and job.state_reason == "exit code 3"
    assert audited(job)[-1] == ("job.failed", cluster.world.vision.pk)


def test_deadline_exceeded_fails_the_job(cluster: Cluster) -> None:
    job = cluster.submit(runtime_s=500, max_runtime=60)
    cluster.drive(lambda: cluster.state(job) == State.FAILED, timeout=40)
    assert job.state_reason == "deadline exceeded: ran past max_runtime of 60 s"


def test_cancel_deletes_the_kubernetes_job(cluster: Cluster) -> None:
    from jobs.actions import cancel_job

    job = cluster.submit(runtime_s=600)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    name = job.k8s_name
    cancel_job(job, acting_user=cluster.world.bob)
    cluster.drive(
        lambda: not any(o["metadata"]["name"] == name for o in cluster.backend.list("jobs").items)
    )
    assert cluster.state(job) == State.CANCELLED


def test_a_warning_about_an_admitted_jobs_pod_becomes_its_reason(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster.backend, "create_job", lambda obj: True)  # no pods yet
    job = cluster.submit(runtime_s=3)
    cluster.drive(lambda: cluster.state(job) == State.ADMITTED)
    cluster.backend.core.create_namespaced_event(
        "gpu-vision",
        {
            "metadata": {"name": "warning-1", "namespace": "gpu-vision"},
            "involvedObject": {
                "kind": "Pod",
                "name": f"{job.k8s_name}-0-abcde",
                "namespace": "gpu-vision",
            },
            "type": "Warning",
            "reason": "FailedScheduling",
            "message": "0/12 nodes are available: 12 Insufficient nvidia.com/gpu.",
        },
    )
    cluster.drive(
        lambda: (
            cluster.state(job) == State.ADMITTED
            and job.state_reason.startswith("FailedScheduling: 0/12 nodes")
        )
    )


def test_a_waiting_job_keeps_why_and_when_until_it_is_admitted(cluster: Cluster) -> None:
    from jobs.actions import cancel_job

    running = [cluster.submit(runtime_s=600, gpus_per_node=8) for _ in range(4)]  # 32 of 32
    waiting = cluster.submit(runtime_s=3, gpus_per_node=8)

    def explained() -> bool:
        waiting.refresh_from_db()
        return all(cluster.state(j) == State.RUNNING for j in running) and bool(
            waiting.pending_code
        )

    cluster.drive(explained)
    assert waiting.state == State.QUEUED
    assert waiting.pending_code == "QUOTA_EXHAUSTED"
    assert (waiting.pending_figures["used"], waiting.pending_figures["limit"]) == (32, 32)
    assert waiting.pending_message == waiting.pending_message.strip() != ""
    assert waiting.estimated_start is not None  # when the running jobs' runtime limits end
    assert waiting.estimated_start_latest is not None
    assert waiting.estimated_start <= waiting.estimated_start_latest

    cancel_job(running[0], acting_user=cluster.world.bob)
    cluster.drive(lambda: cluster.state(waiting) in (State.ADMITTED, State.RUNNING))
    assert (waiting.pending_code, waiting.pending_figures, waiting.estimated_start) == (
        "",
        {},
        None,
    )


def test_a_slow_explaining_cycle_spaces_out_the_next_explanations(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cluster.scheduling as module

    explained: list[bool] = []
    decide = module.decide

    def slow_to_explain(*args: Any, explain: bool) -> Any:
        explained.append(explain)
        if explain:
            cluster.ticks.advance(0.1)  # as a long queue's explanations take
        return decide(*args, explain=explain)

    monkeypatch.setattr(module, "decide", slow_to_explain)
    controller = cluster.new_controller(timing=replace(FAST, explain_every_s=0.0))
    cluster.drive(lambda: Node.objects.count() == 12, controller=controller)
    cluster.ticks.advance(1.0)  # the last explanation's share of the time is spent: due
    explained.clear()
    counted = controller.stats.explaining

    controller.cycle()  # explains, taking 0.1 s: the next explains 0.9 s later at the soonest
    controller.cycle()
    cluster.ticks.advance(0.1 * (1 / module.EXPLAIN_SHARE - 1) - 0.01)
    controller.cycle()
    cluster.ticks.advance(0.02)
    controller.cycle()
    assert explained == [True, False, False, True]
    assert controller.stats.explaining == counted + 2


def test_cycles_between_explanations_admit_and_leave_reasons_as_written(
    cluster: Cluster,
) -> None:
    from jobs.actions import cancel_job
    from tests.cluster.conftest import controller_leads

    controller = cluster.new_controller(timing=replace(FAST, explain_every_s=3600.0))
    assert controller_leads(controller)
    cluster.drive(lambda: Node.objects.count() == 12, controller=controller)
    # The leader explained its first cycle, while the nodes came in; none will explain now.
    running = [cluster.submit(runtime_s=600, gpus_per_node=8) for _ in range(4)]  # 32 of 32
    controller.cycle()
    waiting = cluster.submit(runtime_s=3, gpus_per_node=8)
    controller.cycle()
    waiting.refresh_from_db()
    assert (waiting.state, waiting.pending_code) == (State.QUEUED, "")

    cancel_job(running[0], acting_user=cluster.world.bob)
    second = cluster.submit(runtime_s=3, gpus_per_node=8)
    controller.cycle()  # not explaining, still deciding: the freed GPUs go to the first in line
    assert (cluster.state(waiting), cluster.state(second)) == (State.ADMITTED, State.QUEUED)
    second.refresh_from_db()
    assert second.pending_code == ""

    cluster.ticks.advance(3600.0)  # due at last
    controller.cycle()
    second.refresh_from_db()
    assert second.pending_code == "QUOTA_EXHAUSTED"
    assert second.estimated_start is not None


def test_a_job_stopped_while_its_create_is_on_its_way_leaves_no_job_behind(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs.actions import cancel_job

    sent, answer, created = threading.Event(), threading.Event(), threading.Event()
    create = cluster.backend.create_job

    def slow_create(obj: dict[str, Any]) -> bool:
        sent.set()
        answer.wait(10)  # the API is slow to take this one
        try:
            return create(obj)
        finally:
            created.set()

    monkeypatch.setattr(cluster.backend, "create_job", slow_create)
    job = cluster.submit(runtime_s=600)
    cluster.drive(lambda: cluster.state(job) == State.ADMITTED and sent.is_set())
    name = job.k8s_name
    cancel_job(job, acting_user=cluster.world.bob)
    cluster.drive(lambda: Job.unscoped.get(pk=job.pk).k8s_name == "")  # its delete is sent
    answer.set()
    assert created.wait(10)

    deadline = time.monotonic() + 30  # the delete follows the create
    while any(o["metadata"]["name"] == name for o in cluster.backend.list("jobs").items):
        assert time.monotonic() < deadline, f"Job {name} outlived its cancelled job"
        time.sleep(0.1)


def _one_busy_thread(cluster: Cluster) -> threading.Event:
    """Give the controller one create/delete thread and hold it until the event is set."""
    from cluster.pool import RankedPool

    cluster.controller.kube.shutdown()
    cluster.controller.kube.pool = RankedPool(1, "kube")
    return blocked(cluster.controller.kube.pool)


def test_creates_waiting_for_a_thread_go_out_most_gpus_first(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[str] = []
    create = cluster.backend.create_job

    def recorded(obj: dict[str, Any]) -> bool:
        created.append(obj["metadata"]["name"])
        return create(obj)

    monkeypatch.setattr(cluster.backend, "create_job", recorded)
    cluster.drive(lambda: Node.objects.count() == 12)
    release = _one_busy_thread(cluster)
    jobs = [cluster.submit(runtime_s=600, gpus_per_node=n) for n in (1, 8, 2)]
    cluster.drive(lambda: all(cluster.state(job) == State.ADMITTED for job in jobs))
    release.set()
    cluster.drive(lambda: all(cluster.state(job) == State.RUNNING for job in jobs))

    assert created == [jobs[1].k8s_name, jobs[2].k8s_name, jobs[0].k8s_name]


def test_a_job_stopped_before_its_create_was_sent_is_never_created(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs.actions import cancel_job

    sent: list[str] = []  # names of the Jobs created or deleted
    create, delete = cluster.backend.create_job, cluster.backend.delete_job

    def recorded_create(obj: dict[str, Any]) -> bool:
        sent.append(obj["metadata"]["name"])
        return create(obj)

    def recorded_delete(namespace: str, name: str) -> bool:
        sent.append(name)
        return delete(namespace, name)

    monkeypatch.setattr(cluster.backend, "create_job", recorded_create)
    monkeypatch.setattr(cluster.backend, "delete_job", recorded_delete)
    cluster.drive(lambda: Node.objects.count() == 12)
    release = _one_busy_thread(cluster)
    job = cluster.submit(runtime_s=600)
    cluster.drive(lambda: cluster.state(job) == State.ADMITTED)
    name = job.k8s_name
    cancel_job(job, acting_user=cluster.world.bob)
    cluster.drive(lambda: Job.unscoped.get(pk=job.pk).k8s_name == "")
    release.set()
    cluster.controller.kube.shutdown()  # whatever waited has gone out

    assert name not in sent  # neither created nor deleted
    assert not [o for o in cluster.backend.list("jobs").items if o["metadata"]["name"] == name]


def test_a_job_being_deleted_is_not_reported_as_a_stray(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audit.models import AuditEvent
    from jobs.actions import cancel_job

    answer = threading.Event()
    delete = cluster.backend.delete_job

    def slow_delete(namespace: str, name: str) -> bool:
        answer.wait(10)  # the API is slow to take this one
        return delete(namespace, name)

    monkeypatch.setattr(cluster.backend, "delete_job", slow_delete)
    job = cluster.submit(runtime_s=600)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    cancel_job(job, acting_user=cluster.world.bob)
    cluster.drive(lambda: Job.unscoped.get(pk=job.pk).k8s_name == "")  # its delete is sent
    controller = cluster.controller
    controller.resync()  # while the Job is still there
    answer.set()

    assert controller.stats.strays_deleted == 0
    assert not AuditEvent.chain.filter(action="cluster.stray_deleted").exists()
