"""Preemption, cordon, node loss, and a team's objects kept in its own namespace."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

import pytest

from audit.models import AuditEvent
from cluster import connect
from cluster.actions import set_cordon
from cluster.manifests import LABEL_MANAGED, LABEL_TEAM, PORTAL, sigterm_lead
from cluster.models import Node
from jobs.models import Job, State
from tests.cluster.conftest import Cluster, audited

pytestmark = pytest.mark.django_db(transaction=True)


def _fresh(job: Job) -> Job:
    job.refresh_from_db()
    return job


def _nodes_known(cluster: Cluster) -> None:
    cluster.drive(lambda: Node.objects.filter(ready=True).count() == 12)


def test_higher_queue_preempts_a_lower_preemptible_one_after_its_grace(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cluster.snapshot import QueuedRequests

    returned: list[int] = []  # what the controller tells its kept queue it requeued
    tell = QueuedRequests.returned

    def told(queue: QueuedRequests, job_ids: Iterable[int]) -> None:
        job_ids = list(job_ids)
        returned.extend(job_ids)
        tell(queue, job_ids)

    monkeypatch.setattr(QueuedRequests, "returned", told)
    low = cluster.submit(runtime_s=5000, queue="low", nodes=4, gpus_per_node=8)
    cluster.drive(lambda: cluster.state(low) == State.RUNNING)
    high = cluster.submit(runtime_s=3, queue="high", gpus_per_node=8)
    cluster.drive(lambda: _fresh(low).grace_until is not None)
    grace_until = low.grace_until
    assert low.preempted_for_id == high.pk and "preemption notice" in low.state_reason
    assert cluster.state(high) == State.QUEUED  # waits for the victim's grace period
    cluster.drive(lambda: cluster.state(high) in (State.RUNNING, State.SUCCEEDED))
    steps = [e.to_state for e in low.events.all()]
    preempted_at = steps.index(State.PREEMPTED)
    stopped = low.events.all()[preempted_at].at
    # SIGTERM (the delete) in the grace period's last `sigterm_lead`, not before (whole seconds)
    assert stopped >= grace_until - timedelta(seconds=sigterm_lead(2.0) + 1)
    assert steps[preempted_at - 1 : preempted_at + 2] == [
        State.RUNNING,
        State.PREEMPTED,
        State.QUEUED,
    ]
    actions = set(AuditEvent.chain.filter(target_id=str(low.pk)).values_list("action", flat=True))
    assert {"job.preempt_notice", "job.preempt"} <= actions
    assert returned == [low.pk]


def test_cordon_keeps_new_jobs_off_the_node(cluster: Cluster, settings: object) -> None:
    _nodes_known(cluster)
    connect.backend.cache_clear()
    h100 = list(Node.objects.filter(gpu_type__name="h100-80g").order_by("name"))
    for node in h100[1:]:
        set_cordon(
            node,
            True,
            reason="maintenance",
            acting_user=cluster.world.admin,
            backend=cluster.backend,
        )
    cluster.drive(lambda: Node.objects.filter(cordoned=True).count() == 7)
    jobs = [cluster.submit(runtime_s=200, gpus_per_node=4) for _ in range(3)]
    cluster.drive(lambda: sum(cluster.state(j) == State.RUNNING for j in jobs) == 2)
    for job in jobs:
        job.refresh_from_db()
        assert set(job.placement) <= {h100[0].name}
    waiting = next(j for j in jobs if j.state == State.QUEUED)
    # In the cycle that admits the other two it waits behind them (PRIORITY); once they hold
    # the only schedulable node, for capacity.
    capacity = {"NO_CAPACITY", "ALL_NODES_CORDONED", "FRAGMENTED"}
    cluster.drive(lambda: _fresh(waiting).pending_code in capacity)
    assert waiting.state == State.QUEUED
    assert AuditEvent.chain.filter(action="node.cordon").count() == 7


def test_node_not_ready_requeues_its_jobs_elsewhere(cluster: Cluster) -> None:
    job = cluster.submit(runtime_s=5000, gpus_per_node=8)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    (lost,) = job.placement
    cluster.sim.inject_fault("node-notready", lost)
    cluster.drive(lambda: State.NODE_FAILED in job.events.values_list("to_state", flat=True))
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    assert lost not in job.placement and job.attempts == 2
    assert ("job.node_lost", cluster.world.vision.pk) in audited(job)
    assert not Node.objects.get(name=lost).ready


def test_a_teams_objects_land_only_in_its_namespace(cluster: Cluster) -> None:
    from quotas.models import Quota

    Quota.objects.create(team=cluster.world.nlp, gpu_type=cluster.world.a100, guaranteed=8, limit=8)
    ours = cluster.submit(runtime_s=3)
    theirs = cluster.submit(
        runtime_s=3,
        team="nlp",
        team_obj=cluster.world.nlp,
        owner=cluster.world.carol,
        gpu_type="a100-80g",
    )
    cluster.drive(lambda: {cluster.state(ours), cluster.state(theirs)} == {State.SUCCEEDED})
    for kind in ("jobs", "pods"):
        for obj in cluster.backend.list(kind, f"{LABEL_MANAGED}={PORTAL}").items:
            team = obj["metadata"]["labels"][LABEL_TEAM]
            assert obj["metadata"]["namespace"] == f"gpu-{team}"


def test_stray_jobs_are_deleted_and_audited(cluster: Cluster) -> None:
    _nodes_known(cluster)
    stray = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "job-99999-1",
            "namespace": "gpu-vision",
            "labels": {LABEL_MANAGED: PORTAL, LABEL_TEAM: "vision"},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "python:3.11"}],
                }
            }
        },
    }
    cluster.backend.create_job(stray)
    cluster.drive(lambda: AuditEvent.chain.filter(action="cluster.stray_deleted").exists())
    cluster.drive(
        lambda: (
            not any(
                o["metadata"]["name"] == "job-99999-1" for o in cluster.backend.list("jobs").items
            )
        )
    )
