"""Members connected to a job's, a team's or the cluster's websocket get what is theirs, live."""

from __future__ import annotations

import asyncio
import time
from typing import Any, get_args, get_type_hints, is_typeddict

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import transaction
from django.test import Client
from django.utils import timezone, translation

from base import streams
from base.consumers import LAYER_MESSAGES
from base.streams import publish_log_chunk
from cluster.apply import Explanations, _pending
from cluster.models import JobLogChunk
from jobs.actions import cancel_job, submit_job
from jobs.models import Job, State
from jobs.reasons import reason_text
from jobs.spec import parse_spec
from jobs.states import transition
from jobs.streams import holding_usage, publish_usage
from portal.asgi import application
from scheduler import Pending, Reason, ReasonCode
from tests.conftest import World, spec
from tests.monitoring.conftest import Rig, apost, batch, gpu_sample
from tests.monitoring.conftest import fast_passwords as fast_passwords  # fixtures
from tests.monitoring.conftest import rig as rig

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def _session_cookie(user: Any) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _open(path: str, user: Any) -> WebsocketCommunicator:
    communicator = await _try_open(path, user)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _try_open(path: str, user: Any) -> WebsocketCommunicator:
    cookie = await database_sync_to_async(_session_cookie)(user)
    return WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://testserver"), (b"cookie", cookie)]
    )


async def _next(communicator: WebsocketCommunicator, kind: str) -> dict[str, Any]:
    """The next message of a kind, skipping others (status and usage may come in any order)."""
    while True:
        message = await communicator.receive_json_from(timeout=5)
        if message["type"] == kind:
            return message


def _chunk(job: Job, seq: int, lines: list[str], pod: str = "train-0", publish: bool = True) -> int:
    chunk = JobLogChunk.objects.create(
        team=job.team,
        job=job,
        pod=pod,
        seq=seq,
        first_line=1 + 10 * (seq - 1),
        line_count=len(lines),
        text="\n".join(lines),
    )
    if publish:
        publish_log_chunk(chunk)
    return chunk.pk


async def _lines(communicator: WebsocketCommunicator, count: int) -> list[str]:
    got: list[str] = []
    while len(got) < count:
        got += (await _next(communicator, "job.log"))["lines"]
    return got


def _admit(job: Any) -> None:
    with transaction.atomic():
        transition(job, State.ADMITTED, "admitted", placement={"h100-a-0": 4})


async def test_member_receives_status_changes_of_their_job_and_team(world: World) -> None:
    job = await database_sync_to_async(submit_job)(
        world.vision, parse_spec(spec()), acting_user=world.bob
    )
    on_job = await _open(f"/ws/jobs/{job.pk}/", world.bob)
    on_team = await _open("/ws/teams/vision/", world.alice)
    outsider_team = await _open("/ws/teams/nlp/", world.carol)
    current = await _next(on_job, "job.status")  # the state as it was when the socket opened
    assert (current["job_id"], current["state"]) == (job.pk, "QUEUED")
    await database_sync_to_async(cancel_job)(job, acting_user=world.bob)
    for communicator in (on_job, on_team):
        message = await _next(communicator, "job.status")
        assert (message["job_id"], message["state"]) == (job.pk, "CANCELLED")
        assert message["owner"] == "bob" and message["queue"] == "normal"
    assert await outsider_team.receive_nothing(timeout=0.3)
    # A queued job ending holds no GPUs: no usage message. Admission does change usage.
    assert await on_team.receive_nothing(timeout=0.3)
    held = await database_sync_to_async(submit_job)(
        world.vision, parse_spec(spec(gpus_per_node=4)), acting_user=world.bob
    )
    await database_sync_to_async(_admit)(held)
    usage = await _next(on_team, "team.usage")
    assert usage["rows"] == [{"gpu_type": "h100-80g", "used": 4, "guaranteed": 16, "limit": 32}]
    for communicator in (on_job, on_team, outsider_team):
        await communicator.disconnect()


def _admit_holding_usage(job: Any, held: dict[int, Any]) -> None:
    with holding_usage(held):
        _admit(job)


def _explain(job: Job) -> None:
    """The controller's explaining step, as a cycle writes it: fourth in the queue, second in
    the team's, three jobs ahead."""
    waiting = Pending(Reason(ReasonCode.PRIORITY, {"jobs_ahead": 3}), None, None, 4, 2)
    with transaction.atomic():
        _pending({job.pk: waiting}, Explanations(), timezone.now())


async def test_a_waiting_jobs_new_reason_and_place_reach_its_page_and_team_in_their_words(
    world: World,
) -> None:
    job = await database_sync_to_async(submit_job)(
        world.vision, parse_spec(spec()), acting_user=world.bob
    )
    await database_sync_to_async(_chinese)(world.alice)
    on_job = await _open(f"/ws/jobs/{job.pk}/", world.bob)
    on_team = await _open("/ws/teams/vision/", world.alice)
    outsider_team = await _open("/ws/teams/nlp/", world.carol)
    await _next(on_job, "job.status")  # the state as it was when the socket opened
    await database_sync_to_async(_explain)(job)
    mine, leads = await _next(on_job, "job.waiting"), await _next(on_team, "job.waiting")
    for message in (mine, leads):
        assert (message["job_id"], message["state"], message["pending_code"]) == (
            job.pk,
            "QUEUED",
            "PRIORITY",
        )
        assert message["pending_figures"] == {
            "jobs_ahead": 3,
            "queue_position": 4,
            "team_position": 2,
        }
    assert mine["pending_reason"] == "3 jobs ahead"
    with translation.override("zh-hans"):
        in_chinese = reason_text("PRIORITY", {"jobs_ahead": 3}, "3 jobs ahead")
    assert leads["pending_reason"] == in_chinese != "3 jobs ahead"  # alice reads Chinese
    assert await outsider_team.receive_nothing(timeout=0.3)
    for communicator in (on_job, on_team, outsider_team):
        await communicator.disconnect()


def _chinese(user: Any) -> None:
    from tenants.models import UserPreference

    UserPreference.objects.update_or_create(user=user, defaults={"language": "zh-hans"})


async def test_held_usage_figures_go_out_only_when_published(world: World) -> None:
    job = await database_sync_to_async(submit_job)(
        world.vision, parse_spec(spec(gpus_per_node=4)), acting_user=world.bob
    )
    on_team = await _open("/ws/teams/vision/", world.alice)
    held: dict[int, Any] = {}
    await database_sync_to_async(_admit_holding_usage)(job, held)
    assert (await _next(on_team, "job.status"))["state"] == "ADMITTED"
    assert await on_team.receive_nothing(timeout=0.3)  # the status came; the usage waits
    assert list(held) == [world.vision.pk]

    await database_sync_to_async(publish_usage)(list(held.values()))
    usage = await _next(on_team, "team.usage")
    assert usage["rows"] == [{"gpu_type": "h100-80g", "used": 4, "guaranteed": 16, "limit": 32}]
    await on_team.disconnect()


async def test_member_receives_metrics_and_log_lines_of_their_job(rig: Rig, world: World) -> None:
    on_job = await _open(f"/ws/jobs/{rig.job.pk}/", world.bob)
    at = time.time()
    await apost(
        batch([gpu_sample(i, at, DCGM_FI_DEV_GPU_UTIL=60 + i) for i in range(8)]), rig.token
    )
    metrics = await _next(on_job, "job.metrics")
    assert [(g["index"], g["util"]) for g in metrics["gpus"]] == [
        (0, 60),
        (1, 61),
        (2, 62),
        (3, 63),
    ]
    assert metrics["gpus"][0]["temp"] == 40 and metrics["gpus"][0]["at"] == at
    await database_sync_to_async(_chunk)(rig.job, 1, ["epoch 1", "loss 0.3"])
    log = await _next(on_job, "job.log")
    assert (log["pod"], log["seq"], log["first_line"], log["lines"]) == (
        "train-0",
        1,
        1,
        ["epoch 1", "loss 0.3"],
    )
    await on_job.disconnect()


async def test_outsider_gets_nothing_of_another_teams_job(rig: Rig, world: World) -> None:
    refused = await _try_open(f"/ws/jobs/{rig.job.pk}/", world.carol)
    assert (await refused.connect()) == (False, 4404)


async def test_log_resume_after_reconnect_loses_nothing(rig: Rig, world: World) -> None:
    first = await _open(f"/ws/jobs/{rig.job.pk}/", world.bob)
    await database_sync_to_async(_chunk)(rig.job, 1, ["l1", "l2"])
    seen = await _next(first, "job.log")
    await first.disconnect()
    for seq in (2, 3, 4):  # written while the browser was away
        await database_sync_to_async(_chunk)(rig.job, seq, [f"l{seq + 1}"])
    again = await _open(f"/ws/jobs/{rig.job.pk}/?after={seen['chunk_id']}", world.bob)
    assert await _lines(again, 3) == ["l3", "l4", "l5"]
    await database_sync_to_async(_chunk)(rig.job, 5, ["l6"])
    assert await _lines(again, 1) == ["l6"]
    assert await again.receive_nothing(timeout=0.2)  # and nothing twice
    await again.disconnect()


async def test_a_log_chunk_missing_from_the_live_stream_is_filled_in(
    rig: Rig, world: World
) -> None:
    on_job = await _open(f"/ws/jobs/{rig.job.pk}/?after=0", world.bob)
    await database_sync_to_async(_chunk)(rig.job, 1, ["a"])
    await database_sync_to_async(_chunk)(rig.job, 2, ["b"], publish=False)  # its message lost
    await database_sync_to_async(_chunk)(rig.job, 3, ["c"])
    assert await _lines(on_job, 3) == ["a", "b", "c"]
    await on_job.disconnect()


async def test_a_fresh_page_starts_with_the_recent_log(rig: Rig, world: World) -> None:
    await database_sync_to_async(_chunk)(rig.job, 1, ["before"], publish=False)
    on_job = await _open(f"/ws/jobs/{rig.job.pk}/", world.bob)
    assert await _lines(on_job, 1) == ["before"]
    await on_job.disconnect()


async def test_admins_see_the_cluster_and_others_are_refused(rig: Rig, world: World) -> None:
    for user in (world.alice, world.bob, world.carol):
        refused = await _try_open("/ws/cluster/", user)
        assert (await refused.connect()) == (False, 4403)
    cluster = await _open("/ws/cluster/", world.admin)
    now = time.time()
    await apost(
        batch([gpu_sample(i, now) for i in range(8)], xids=[{"index": 6, "xid": 79, "at": now}]),
        rig.token,
    )
    seen: dict[str, dict[str, Any]] = {}
    while len(seen) < 2:  # the Xid and the GPU figures may arrive in either order
        message = await cluster.receive_json_from(timeout=5)
        if message["type"] in ("cluster.gpus", "cluster.xid"):
            seen.setdefault(message["type"], message)
    gpus, xid = seen["cluster.gpus"], seen["cluster.xid"]
    assert gpus["node"] == rig.node.name and len(gpus["gpus"]) == 8
    assert [g["job_id"] for g in gpus["gpus"]] == [rig.job.pk] * 4 + [None] * 4
    assert (xid["index"], xid["xid"], xid["fatal"]) == (6, 79, True)
    await cluster.disconnect()


@pytest.mark.skipif(not settings.REDIS_URL, reason="a Redis layer matter")
def test_an_idle_socket_outlives_the_layers_blocking_read() -> None:
    # The layer blocks on Redis for `brpop_timeout` seconds when nothing arrives; a client read
    # timeout no longer than that killed the consumer of every quiet job (redis-py 8 reads with
    # 5 s by default, the same as the block). Checked on the configuration, not by waiting.
    layer = streams.get_channel_layer()
    assert layer.hosts
    assert all(host["socket_timeout"] > layer.brpop_timeout for host in layer.hosts)


def test_every_stream_message_type_goes_to_the_delivery() -> None:
    kinds = {
        get_args(get_type_hints(message)["type"])[0]
        for message in vars(streams).values()
        if is_typeddict(message) and "type" in message.__annotations__
    }
    assert kinds == LAYER_MESSAGES


def test_a_thread_with_its_own_loop_sends_on_it_every_time(monkeypatch: Any) -> None:
    layer = streams.get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("own.loop", channel)
    loops: list[asyncio.AbstractEventLoop] = []
    real_send_all = streams.send_all

    async def recording(messages: Any) -> None:
        loops.append(asyncio.get_running_loop())
        await real_send_all(messages)

    monkeypatch.setattr(streams, "send_all", recording)
    with streams.own_event_loop():
        for n in (1, 2):
            streams.send_now([("own.loop", {"type": "test.message", "n": n})])
    streams.send_now([("own.loop", {"type": "test.message", "n": 3})])

    received = [async_to_sync(layer.receive)(channel)["n"] for _ in range(3)]
    assert received == [1, 2, 3]
    # One loop for the block, closed at its end; outside it, one made for the send.
    assert loops[0] is loops[1] and loops[0].is_closed() and loops[2] is not loops[0]


def test_a_send_that_fails_is_logged_and_dropped(monkeypatch: Any, caplog: Any) -> None:
    async def unreachable(messages: Any) -> None:
        raise ConnectionError("Redis is away")

    monkeypatch.setattr(streams, "send_all", unreachable)
    with streams.own_event_loop():
        streams.send_now([("team.1.jobs", {"type": "job.status"})])  # raises nothing
        streams.send_now([("team.1.jobs", {"type": "job.status"})])  # the loop still works
    streams.send_now([("team.1.jobs", {"type": "job.status"})])

    failures = [r for r in caplog.records if "live messages not sent" in r.getMessage()]
    assert len(failures) == 3 and "Redis is away" in failures[0].getMessage()
