"""Posts answered in groups: each gets its own reply; a group adds up like its posts one by one;
one batch that cannot be stored fails alone; many posts at once are all stored."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.core.cache import cache

from cluster.models import Node
from monitoring import intake
from monitoring.endpoint import read_post
from monitoring.intake import Received, answer
from monitoring.models import GpuMinute, JobMetrics
from monitoring.tokens import rotate_node_token
from tests.monitoring.conftest import Rig, apost, batch, gpu_sample
from tests.monitoring.test_ingest import MINUTE


def _post(token: str, body: Any) -> Received:
    return read_post(token, "POST", json.dumps(body).encode())


def _minute(rig: Rig, index: int) -> GpuMinute:
    return GpuMinute.objects.get(gpu__node=rig.node, gpu__index=index, minute=MINUTE)


def test_each_post_of_a_group_gets_its_own_reply(rig: Rig) -> None:
    posts = [
        _post(rig.token, batch([gpu_sample(0, MINUTE + 1)])),
        _post("gpn_wrong", batch([gpu_sample(1, MINUTE + 1)])),
        _post(rig.token, batch([gpu_sample(2, MINUTE + 1)], node="h100-a-2")),
        _post(rig.token, batch([gpu_sample(3, MINUTE + 1, DCGM_FI_DEV_GPU_TEMP=400)])),
        read_post(rig.token, "GET", b""),
        _post(rig.token, batch([gpu_sample(4, MINUTE + 1)])),
    ]
    replies = [reply for reply, _ in answer(posts)]
    assert [r.status for r in replies] == [202, 401, 403, 400, 405, 202]
    assert replies[0].body == {"accepted": 1, "xids": 0}
    assert list(replies[3].body) == ["gpus[0].DCGM_FI_DEV_GPU_TEMP"]
    stored = GpuMinute.objects.filter(gpu__node=rig.node).values_list("gpu__index", flat=True)
    assert sorted(stored) == [0, 4]


def test_a_nodes_posts_in_one_group_add_up_as_one_by_one(rig: Rig) -> None:
    energy = {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 1_000_000}
    later = {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 3_000_000, "DCGM_FI_DEV_GPU_UTIL": 90}
    posts = [
        _post(rig.token, batch([gpu_sample(i, MINUTE + 5, **energy) for i in range(8)])),
        _post(rig.token, batch([gpu_sample(i, MINUTE + 10, **later) for i in range(8)])),
    ]
    results = answer(posts)
    assert [reply.status for reply, _ in results] == [202, 202]
    assert (_minute(rig, 1).samples, _minute(rig, 1).util_max) == (2, 90)
    totals = JobMetrics.objects.for_team(rig.job.team).get(job=rig.job)
    assert totals.samples == 8 and totals.gpu_seconds == 8 * 5
    assert totals.energy_joules == pytest.approx(4 * 2000)  # 2 kJ on each of its 4 GPUs
    metrics = [m for _, outgoing in results for _, m in outgoing if m["type"] == "job.metrics"]
    assert [m["gpus"][0]["util"] for m in metrics] == [50, 90]  # each post's own readings


@pytest.mark.django_db(transaction=True)
def test_a_batch_that_cannot_be_stored_fails_alone(rig: Rig) -> None:
    other = Node.objects.create(name="h100-a-2", gpu_type=rig.node.gpu_type, gpu_capacity=8)
    other_token = rotate_node_token(other)
    cache.set(f"monitoring.gpu-ids.{other.pk}", {0: 987654321}, 60)  # a GPU row long gone
    posts = [
        _post(rig.token, batch([gpu_sample(0, MINUTE + 1)])),
        _post(other_token, batch([gpu_sample(0, MINUTE + 1)], node="h100-a-2")),
    ]
    assert [reply.status for reply, _ in answer(posts)] == [202, 500]
    assert _minute(rig, 0).samples == 1
    assert not GpuMinute.objects.filter(gpu__node=other).exists()


@pytest.mark.django_db(transaction=True)
async def test_many_posts_at_once_are_all_stored(rig: Rig) -> None:
    bodies = [batch([gpu_sample(i % 8, MINUTE + 1 + i // 8)]) for i in range(40)]
    replies = await asyncio.gather(*(apost(body, rig.token) for body in bodies))
    assert [r.status_code for r in replies] == [202] * 40
    minutes = await database_sync_to_async(list)(
        GpuMinute.objects.filter(gpu__node=rig.node, minute=MINUTE).values_list("samples")
    )
    assert sorted(minutes) == [(5,)] * 8


@pytest.mark.django_db(transaction=True)
async def test_a_post_arriving_while_the_last_group_fans_out_is_answered(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, fanning = asyncio.Event(), asyncio.Event()
    send_all = intake.send_all

    async def held_send_all(messages: Any) -> None:
        fanning.set()
        await release.wait()
        await send_all(messages)

    monkeypatch.setattr(intake, "send_all", held_send_all)
    first = asyncio.create_task(apost(batch([gpu_sample(0, MINUTE + 1)]), rig.token))
    await asyncio.wait_for(fanning.wait(), 10)
    second = asyncio.create_task(apost(batch([gpu_sample(1, MINUTE + 1)]), rig.token))
    await asyncio.sleep(0.2)  # the second post is queued while the first group fans out
    release.set()
    replies = await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert [reply.status_code for reply in replies] == [202, 202]
