"""A preemption notice reaches the workload (annotation, downward API file, SIGTERM before the
deadline) and is withdrawn when the job it made room for no longer waits (through kubesim)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from audit.models import AuditEvent
from cluster.backend import Obj
from cluster.manifests import (
    ANNOTATION_DEADLINE,
    DEADLINE_FILE,
    LABEL_JOB,
    PODINFO_DIR,
    sigterm_lead,
)
from cluster.snapshot import QueuedRequests
from jobs.actions import cancel_job
from jobs.models import Job, State
from notifications.models import Notification
from quotas.models import Quota
from tests.cluster.conftest import Cluster

pytestmark = pytest.mark.django_db(transaction=True)
DEADLINE_PATH = f"{PODINFO_DIR}/{DEADLINE_FILE}"
PREEMPTION_GRACE_S = 2.0  # the cluster fixture's controller's


def _fresh(job: Job) -> Job:
    job.refresh_from_db()
    return job


def _pods(cluster: Cluster, job: Job) -> list[Obj]:
    return cluster.backend.list("pods", f"{LABEL_JOB}={job.pk}").items


def _files(cluster: Cluster, pod: Obj) -> dict[str, str]:
    """The downward API files its containers see, as kubesim's kubelet keeps them."""
    return cluster.sim.sim.kubelet.pods[pod["metadata"]["uid"]].files


def _log(cluster: Cluster, pod: Obj) -> str:
    from kubernetes import client

    core = client.CoreV1Api(cluster.backend.api)
    meta = pod["metadata"]
    return str(core.read_namespaced_pod_log(meta["name"], meta["namespace"]))


def _annotated(cluster: Cluster, job: Job, present: bool) -> bool:
    pods = _pods(cluster, job)
    return bool(pods) and all(
        (ANNOTATION_DEADLINE in (p["metadata"].get("annotations") or {})) == present for p in pods
    )


def _preempted(cluster: Cluster) -> tuple[Job, Job]:
    low = cluster.submit(runtime_s=5000, queue="low", nodes=4, gpus_per_node=8)
    cluster.drive(lambda: cluster.state(low) == State.RUNNING)
    high = cluster.submit(runtime_s=3, queue="high", gpus_per_node=8)
    cluster.drive(lambda: _fresh(low).grace_until is not None)
    return low, high


def test_the_notice_shows_in_the_pods_file_and_sigterm_comes_before_the_deadline(
    cluster: Cluster,
) -> None:
    low, _ = _preempted(cluster)
    cluster.drive(lambda: _annotated(cluster, low, True))
    pods = _pods(cluster, low)
    deadline = low.grace_until
    assert deadline is not None
    written = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert {p["metadata"]["annotations"][ANNOTATION_DEADLINE] for p in pods} == {written}
    assert all(_files(cluster, p)[DEADLINE_PATH] == written for p in pods)
    assert all(f"{DEADLINE_PATH}: '{written}'" in _log(cluster, p) for p in pods)
    kubelets = [cluster.sim.sim.kubelet.pods[p["metadata"]["uid"]] for p in pods]
    cluster.drive(lambda: cluster.state(low) == State.QUEUED)
    stopped = low.events.get(to_state=State.PREEMPTED).at
    lead = timedelta(seconds=sigterm_lead(PREEMPTION_GRACE_S))
    assert deadline - lead - timedelta(seconds=1) <= stopped < deadline  # (whole seconds)
    # The Job's deletion reaches kubesim after the portal's commit, from the controller's pool.
    cluster.drive(lambda: all(k.runs[-1].finished is not None for k in kubelets))
    for kubelet in kubelets:
        assert any("SIGTERM" in note for _, note in kubelet.runs[-1].notes)


def test_a_victim_runs_on_when_the_job_it_made_room_for_no_longer_waits(
    cluster: Cluster,
) -> None:
    low, high = _preempted(cluster)
    cluster.drive(lambda: _annotated(cluster, low, True))
    pods = {p["metadata"]["uid"] for p in _pods(cluster, low)}
    cancel_job(high, acting_user=cluster.world.bob)
    cluster.drive(lambda: _fresh(low).grace_until is None)
    assert low.state == State.RUNNING and low.preempted_for_id is None
    assert "preemption withdrawn" in low.state_reason
    cluster.drive(lambda: _annotated(cluster, low, False))
    assert {p["metadata"]["uid"] for p in _pods(cluster, low)} == pods  # never restarted
    assert all(_files(cluster, p)[DEADLINE_PATH] == "" for p in _pods(cluster, low))
    withdrawn = AuditEvent.chain.filter(target_id=str(low.pk), action="job.preempt_withdrawn")
    assert withdrawn.count() == 1
    told = Notification.objects.filter(user=cluster.world.bob, link=f"/jobs/{low.pk}/")
    assert [n.title for n in told.order_by("pk")] == [
        f"Job {low.name} ({low.pk}) will be preempted",
        f"Preemption of job {low.name} ({low.pk}) withdrawn",
    ]
    assert State.PREEMPTED not in {e.to_state for e in low.events.all()}


def test_a_stopped_victim_yields_to_the_job_it_was_stopped_for(cluster: Cluster) -> None:
    """Back in the queue, the victim keeps the job it was stopped for, the scheduler's
    snapshot says it yields to it, and it lets go when it is admitted again."""
    low, high = _preempted(cluster)
    cluster.drive(lambda: cluster.state(low) == State.QUEUED)
    assert _fresh(low).preempted_for_id == high.pk and low.grace_until is None
    assert low.state == State.QUEUED
    queued = {request.id: request for request in QueuedRequests().current()}
    assert queued[low.pk].yields_to == high.pk
    cluster.drive(lambda: cluster.state(low) == State.RUNNING)
    assert _fresh(low).preempted_for_id is None
    restarted = low.events.filter(to_state=State.ADMITTED).order_by("-at").first()
    admitted = high.events.get(to_state=State.ADMITTED)
    assert restarted is not None and admitted.at <= restarted.at


def test_a_job_that_can_never_start_tells_its_owner_and_leads_once(cluster: Cluster) -> None:
    job = cluster.submit(nodes=4, gpus_per_node=8)
    # The lead lowers the team's limit before the controller's next turn.
    Quota.objects.for_team(cluster.world.vision).update(limit=16)
    cluster.drive(lambda: _fresh(job).pending_code == "NEVER_FITS")
    for _ in range(10):  # later cycles explain it again
        cluster.drive(lambda: True)
    title = f"Job {job.name} ({job.pk}) can never start as things are"
    told = Notification.objects.filter(title=title)
    assert sorted(told.values_list("user__username", flat=True)) == ["alice", "bob"]
    assert all("team quota" in n.body for n in told)
