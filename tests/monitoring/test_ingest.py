"""Agents' batches: rolled up per GPU-minute, totalled per job, kept hot; Xids mark GPUs."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from agent import fields as agent_fields
from audit.models import AuditEvent
from cluster.models import Gpu, Node
from monitoring import hot
from monitoring.models import GpuMinute, JobMetrics, XidEvent
from monitoring.retention import prune_rollups
from monitoring.schema import METRICS
from monitoring.tasks import prune_old_rollups
from monitoring.tokens import token_hash
from tenants.tokens import issue_token
from tests.conftest import World
from tests.monitoring.conftest import NODE, Rig, batch, gpu_sample, post

MINUTE = (int(time.time()) // 60 - 1) * 60  # a whole minute, safely in the past


def test_a_batch_is_rolled_up_per_gpu_minute_and_totalled_per_job(rig: Rig) -> None:
    gpus = [gpu_sample(i, MINUTE + 10) for i in range(8)]
    later = [
        gpu_sample(
            i, MINUTE + 15, DCGM_FI_DEV_GPU_UTIL=90, DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION=2_500_000
        )
        for i in range(8)
    ]
    response = post(batch(gpus + later), rig.token)
    assert response.status_code == 202, response.content
    rollup = GpuMinute.objects.get(gpu__node=rig.node, gpu__index=1, minute=MINUTE)
    assert (rollup.samples, rollup.util_sum, rollup.util_max) == (2, 51 + 90, 90)
    assert (rollup.fb_used_max, rollup.temp_max, rollup.job_id) == (1000, 41, rig.job.pk)
    idle = GpuMinute.objects.get(gpu__node=rig.node, gpu__index=6, minute=MINUTE)
    assert idle.job_id is None  # the job holds 4 of the 8 GPUs: indexes 0-3
    totals = JobMetrics.objects.for_team(rig.job.team).get(job=rig.job)
    assert totals.samples == 8 and totals.util_peak == 90
    assert totals.util_average == pytest.approx((50 + 51 + 52 + 53 + 4 * 90) / 8)
    assert totals.gpu_seconds == 8 * 5 and totals.fb_used_peak == 3000
    assert totals.energy_joules == pytest.approx(4 * 1500)  # 1.5 kJ on each of its 4 GPUs
    latest = hot.latest([(rig.node.pk, 2)])[(rig.node.pk, 2)]
    assert latest["at"] == MINUTE + 15 and latest["job_id"] == rig.job.pk


def test_a_second_batch_adds_to_the_same_minute_and_the_job(rig: Rig) -> None:
    post(batch([gpu_sample(0, MINUTE + 5)]), rig.token)
    post(batch([gpu_sample(0, MINUTE + 10, DCGM_FI_DEV_GPU_TEMP=70)]), rig.token)
    rollup = GpuMinute.objects.get(gpu__node=rig.node, gpu__index=0, minute=MINUTE)
    assert (rollup.samples, rollup.temp_max) == (2, 70)
    assert JobMetrics.objects.for_team(rig.job.team).get(job=rig.job).gpu_seconds == 10


def test_fields_a_gpu_does_not_offer_may_be_absent(rig: Rig) -> None:
    bare = {"index": 7, "at": MINUTE + 1}  # a GPU off the bus reports nothing else
    assert post(batch([bare, gpu_sample(1, MINUTE + 1)]), rig.token).status_code == 202
    assert GpuMinute.objects.get(gpu__node=rig.node, gpu__index=7).samples == 0


def _without(key: str) -> dict[str, Any]:
    sample = gpu_sample(3)
    del sample[key]
    return sample


INVALID: list[tuple[str, Any, str, str]] = [
    (
        "temperature",
        {
            "gpus": [
                gpu_sample(0),
                gpu_sample(1),
                gpu_sample(2),
                gpu_sample(3, DCGM_FI_DEV_GPU_TEMP=400),
            ]
        },
        "gpus[3].DCGM_FI_DEV_GPU_TEMP",
        "must be a number between 0 and 150",
    ),
    (
        "utilisation",
        {"gpus": [gpu_sample(0, DCGM_FI_DEV_GPU_UTIL=-1)]},
        "gpus[0].DCGM_FI_DEV_GPU_UTIL",
        "must be a number between 0 and 100",
    ),
    (
        "text for a number",
        {"gpus": [gpu_sample(0, DCGM_FI_DEV_POWER_USAGE="300")]},
        "gpus[0].DCGM_FI_DEV_POWER_USAGE",
        "must be a number between 0 and 5000",
    ),
    (
        "boolean for a number",
        {"gpus": [gpu_sample(0, DCGM_FI_DEV_ROW_REMAP_PENDING=True)]},
        "gpus[0].DCGM_FI_DEV_ROW_REMAP_PENDING",
        "must be an integer between 0 and 1",
    ),
    (
        "fraction for a counter",
        {"gpus": [gpu_sample(0, DCGM_FI_DEV_ECC_DBE_VOL_TOTAL=1.5)]},
        "gpus[0].DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "must be an integer between 0 and 9.22337e+18",
    ),
    (
        "unknown field",
        {"gpus": [gpu_sample(0, DCGM_FI_DEV_FAN_SPEED=10)]},
        "gpus[0].DCGM_FI_DEV_FAN_SPEED",
        "unknown field",
    ),
    ("missing index", {"gpus": [_without("index")]}, "gpus[0].index", "this field is required"),
    (
        "index out of range",
        {"gpus": [gpu_sample(64)]},
        "gpus[0].index",
        "must be an integer between 0 and 63",
    ),
    (
        "sample from yesterday",
        {"gpus": [gpu_sample(0, at=time.time() - 86400)]},
        "gpus[0].at",
        "must be a Unix time within the last 6 hours",
    ),
    (
        "uuid too long",
        {"gpus": [gpu_sample(0, uuid="x" * 65)]},
        "gpus[0].uuid",
        "must be a string of at most 64 characters",
    ),
    ("gpus not a list", {"gpus": {"0": {}}}, "gpus", "must be a list"),
    ("a sample not an object", {"gpus": [5]}, "gpus[0]", "must be an object"),
    (
        "too many samples",
        {"gpus": [gpu_sample(0)] * 10_001},
        "gpus",
        "at most 10000 entries per post, got 10001",
    ),
    ("interval", {"interval": 0}, "interval", "must be a number between 0.01 and 3600"),
    (
        "xid code",
        {"xids": [{"index": 0, "xid": 0, "at": time.time()}]},
        "xids[0].xid",
        "must be an integer between 1 and 10000",
    ),
    (
        "xid without code",
        {"xids": [{"index": 0, "at": time.time()}]},
        "xids[0].xid",
        "this field is required",
    ),
    ("unknown top-level key", {"extra": 1}, "extra", "unknown field"),
]


@pytest.mark.parametrize(
    ("rule", "change", "field", "message"), INVALID, ids=[r[0] for r in INVALID]
)
def test_an_invalid_batch_gets_400_naming_the_field_and_stores_nothing(
    rig: Rig, rule: str, change: dict[str, Any], field: str, message: str
) -> None:
    body = batch([gpu_sample(0)], xids=[{"index": 0, "xid": 79, "at": time.time()}])
    body.update(change)
    response = post(body, rig.token)
    assert response.status_code == 400
    assert response.json()[field] == [message]
    assert not GpuMinute.objects.exists() and not XidEvent.objects.exists()
    assert not JobMetrics.objects.for_team(rig.job.team).exists()
    assert hot.latest([(rig.node.pk, 0)]) == {}


def test_a_body_that_is_not_json_gets_400(rig: Rig) -> None:
    response = post("{not json", rig.token)
    assert response.status_code == 400 and "non_field_errors" in response.json()


@pytest.mark.parametrize("token", [None, "gpn_wrong", ""])
def test_a_missing_or_wrong_token_gets_401(rig: Rig, token: str | None) -> None:
    response = post(batch([gpu_sample(0)]), token)
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert not GpuMinute.objects.exists()


def test_a_signed_in_user_is_no_node(rig: Rig, world: World) -> None:
    _, api_token = issue_token(world.admin, "admin-laptop")
    assert post(batch([gpu_sample(0)]), api_token).status_code == 401
    client = Client()
    client.force_login(world.admin)
    cookie = {"cookie": f"sessionid={client.cookies['sessionid'].value}"}
    assert post(batch([gpu_sample(0)]), None, headers=cookie).status_code == 401
    assert not GpuMinute.objects.exists()


def test_a_node_cannot_post_for_another_node(rig: Rig) -> None:
    Node.objects.create(name="h100-a-2", gpu_capacity=8)
    response = post(batch([gpu_sample(0)], node="h100-a-2"), rig.token)
    assert response.status_code == 403
    assert response.json() == {"node": [f"must be this token's node, {NODE!r}"]}
    assert not GpuMinute.objects.exists()


def test_a_fatal_xid_marks_the_gpu_unhealthy_and_is_kept(rig: Rig) -> None:
    now = time.time()
    xids = [{"index": 5, "xid": 31, "at": now}, {"index": 6, "xid": 79, "at": now}]
    assert post(batch([], xids=xids), rig.token).status_code == 202
    gpus = {g.index: g for g in Gpu.objects.filter(node=rig.node)}
    assert (gpus[5].healthy, gpus[5].last_xid) == (True, 31)  # 31: a page fault, the job's bug
    assert (gpus[6].healthy, gpus[6].last_xid) == (False, 79)
    assert sorted(XidEvent.objects.values_list("xid", "fatal", "node__name")) == [
        (31, False, NODE),
        (79, True, NODE),
    ]


def test_ingestion_queries_do_not_grow_with_the_batch(
    rig: Rig, django_assert_max_num_queries: Any
) -> None:
    post(batch([gpu_sample(i) for i in range(8)]), rig.token)  # warm the node and GPU caches
    backlog = [gpu_sample(i, MINUTE - 60 * m + 5) for m in range(30) for i in range(8)]
    with django_assert_max_num_queries(8):
        assert post(batch(backlog), rig.token).status_code == 202
    assert GpuMinute.objects.filter(gpu__node=rig.node).count() == 8 * 30 + 8


def test_roll_ups_past_the_retention_are_pruned(rig: Rig, settings: Any) -> None:
    settings.METRICS_RETENTION_DAYS = 1
    now = time.time()
    post(batch([gpu_sample(0, now - 3600 * 5), gpu_sample(0, now - 60)]), rig.token)
    assert prune_rollups(now=now + 86400 - 3600) == 1
    assert GpuMinute.objects.count() == 1
    assert JobMetrics.objects.for_team(rig.job.team).get(job=rig.job).samples == 2


def test_node_token_command_rotates_prints_once_and_audits(
    rig: Rig, world: World, capsys: Any
) -> None:
    call_command("node_token", NODE)
    new = capsys.readouterr().out.strip()
    assert new.startswith("gpn_")
    assert post(batch([gpu_sample(0)]), rig.token).status_code == 401
    assert post(batch([gpu_sample(0)]), new).status_code == 202
    rig.node.refresh_from_db()
    assert rig.node.agent_token_hash == token_hash(new)  # only the hash is stored
    events = AuditEvent.objects.for_user(world.admin).filter(
        action="node.token", target_id=str(rig.node.pk)
    )
    assert list(events.values_list("team_id", flat=True)) == [None, None]  # fixture's, command's


def test_the_portal_knows_every_field_the_agent_sends() -> None:
    sent = {v for k, v in vars(agent_fields).items() if k.isupper()}
    assert sent == set(METRICS)


def test_replies_carry_the_agents_request_id_or_a_new_one(rig: Rig) -> None:
    sent = post(batch([gpu_sample(0)]), rig.token, headers={"x-request-id": "agent-42"})
    assert sent["X-Request-ID"] == "agent-42"
    made = {post(batch([gpu_sample(0)]), rig.token)["X-Request-ID"] for _ in range(3)}
    assert len(made) == 3 and all(len(id_) == 32 and int(id_, 16) >= 0 for id_ in made)


def test_a_gpu_keeps_its_latest_sample_when_a_post_leaves_it_out(rig: Rig) -> None:
    post(batch([gpu_sample(i, MINUTE + 5) for i in range(8)]), rig.token)
    post(batch([gpu_sample(0, MINUTE + 10, DCGM_FI_DEV_GPU_UTIL=99)]), rig.token)
    latest = hot.latest([(rig.node.pk, 0), (rig.node.pk, 5)])
    assert latest[(rig.node.pk, 0)]["DCGM_FI_DEV_GPU_UTIL"] == 99
    assert latest[(rig.node.pk, 5)]["at"] == MINUTE + 5


def test_the_pruning_task_deletes_rollups_past_the_retention(rig: Rig, settings: Any) -> None:
    settings.METRICS_RETENTION_DAYS = 1
    now = time.time()
    post(batch([gpu_sample(0, now - 3600 * 5), gpu_sample(0, now - 60)]), rig.token)
    oldest = GpuMinute.objects.order_by("minute").first()
    assert oldest is not None
    GpuMinute.objects.filter(pk=oldest.pk).update(minute=oldest.minute - 86400)
    assert prune_old_rollups.apply().get() == 1  # in this process, whatever the broker
    assert GpuMinute.objects.count() == 1
