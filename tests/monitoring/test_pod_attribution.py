"""When the agent says which pod holds a GPU (the kubelet's pod-resources), that decides."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.cache import cache

from cluster.models import Node
from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from monitoring import hot, intake
from monitoring.gpu_owners import owners_key
from monitoring.models import GpuMinute, JobMetrics
from tests.conftest import World, spec
from tests.monitoring.conftest import NODE, Rig, batch, gpu_sample, post, run_on

MINUTE = (int(time.time()) // 60 - 1) * 60


def _pod(job: Job, namespace: str | None = None) -> str:
    Job.unscoped.filter(pk=job.pk).update(k8s_name=f"job-{job.pk}-1")
    return f"{namespace or job.team.namespace}/job-{job.pk}-1-0-x7k2p"


def _owner(rig: Rig, index: int) -> int | None:
    return GpuMinute.objects.get(gpu__node=rig.node, gpu__index=index, minute=MINUTE).job_id


def test_the_reported_pod_wins_over_the_placement_order(rig: Rig, world: World) -> None:
    # By placement the rig's job would own indexes 0-3; the kubelet says it holds 4-7.
    pod = _pod(rig.job)
    gpus = [gpu_sample(i, MINUTE + 10, pod=pod if i >= 4 else "") for i in range(8)]
    assert post(batch(gpus), rig.token).status_code == 202
    assert [_owner(rig, i) for i in range(8)] == [None] * 4 + [rig.job.pk] * 4


def test_a_pod_in_another_teams_namespace_claims_nothing(rig: Rig, world: World) -> None:
    forged = _pod(rig.job, namespace=world.nlp.namespace)
    gpus = [gpu_sample(i, MINUTE + 10, pod=forged) for i in range(8)]
    assert post(batch(gpus), rig.token).status_code == 202
    assert {_owner(rig, i) for i in range(8)} == {None}


def test_a_pod_of_an_older_attempt_claims_nothing(rig: Rig) -> None:
    pod = _pod(rig.job)
    Job.unscoped.filter(pk=rig.job.pk).update(k8s_name=f"job-{rig.job.pk}-2")
    assert post(batch([gpu_sample(0, MINUTE + 10, pod=pod)]), rig.token).status_code == 202
    assert _owner(rig, 0) is None


def test_gpus_reported_without_a_pod_fall_back_to_placement(rig: Rig, world: World) -> None:
    other = run_on(
        submit_job(world.vision, parse_spec(spec(gpus_per_node=2)), acting_user=world.bob),
        {NODE: 2},
    )
    gpus = [gpu_sample(0, MINUTE + 10), gpu_sample(7, MINUTE + 10, pod=_pod(other))]
    assert post(batch(gpus), rig.token).status_code == 202
    assert (_owner(rig, 0), _owner(rig, 7)) == (rig.job.pk, other.pk)


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        ("no-slash", 'must be "namespace/name", or "" for a GPU no pod holds'),
        ("a/b/c", 'must be "namespace/name", or "" for a GPU no pod holds'),
        ("n/" + "p" * 400, "must be a string of at most 317 characters"),
        (7, "must be a string of at most 317 characters"),
    ],
)
def test_a_malformed_pod_gets_400_naming_the_field(rig: Rig, pod: object, message: str) -> None:
    response = post(batch([gpu_sample(0, MINUTE + 10, pod=pod)]), rig.token)
    assert response.status_code == 400
    assert response.json()["gpus[0].pod"] == [message]
    assert not GpuMinute.objects.exists()


def test_a_node_cannot_claim_a_pod_running_on_another_node(
    rig: Rig, world: World, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[Any] = []

    async def record(messages: list[Any]) -> None:
        sent.extend(messages)

    monkeypatch.setattr(intake, "send_all", record)
    Node.objects.create(name="h100-b-1", gpu_type=world.h100, gpu_capacity=8, ready=True)
    nlp_job = run_on(
        submit_job(
            world.nlp, parse_spec(spec(team="nlp", gpus_per_node=4)), acting_user=world.carol
        ),
        {"h100-b-1": 4},
    )
    gpus = [gpu_sample(i, MINUTE + 10, pod=_pod(nlp_job)) for i in range(8)]
    response = post(batch(gpus), rig.token)
    assert response.status_code == 202
    assert not JobMetrics.objects.for_team(world.nlp).exists()  # no GPU-hours, no energy
    assert {_owner(rig, i) for i in range(8)} == {None}
    assert {s["job_id"] for s in hot.of_nodes([rig.node.pk])[rig.node.pk].values()} == {None}
    assert [m["type"] for _, m in sent] == ["cluster.gpus"]  # no live figures for the nlp job
    refused = [r.getMessage() for r in caplog.records if "not placed on it" in r.getMessage()]
    assert refused == [
        f"node {NODE} named pods of jobs [{nlp_job.pk}], which are not placed on it: "
        "its 8 samples of GPUs [0, 1, 2, 3, 4, 5, 6, 7] count for no job"
    ]


def test_a_pod_is_attributed_though_the_cached_placement_predates_its_job(rig: Rig) -> None:
    cache.set(owners_key(NODE), {}, 60)  # read just before the job started on the node
    pod = _pod(rig.job)
    assert post(batch([gpu_sample(5, MINUTE + 10, pod=pod)]), rig.token).status_code == 202
    assert _owner(rig, 5) == rig.job.pk
