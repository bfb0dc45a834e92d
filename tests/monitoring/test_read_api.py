"""The read endpoints behind the live pages: logs, a job's metrics, a team's live list."""

from __future__ import annotations

import time
from typing import Any

import pytest

from cluster.models import JobLogChunk
from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from tests.conftest import World, api_as, spec
from tests.monitoring.conftest import Rig, batch, gpu_sample, post


def add_chunk(job: Job, pod: str, seq: int, lines: list[str]) -> JobLogChunk:
    before = sum(
        JobLogChunk.objects.for_team(job.team)
        .filter(job=job, pod=pod)
        .values_list("line_count", flat=True)
    )
    return JobLogChunk.objects.create(
        team=job.team,
        job=job,
        pod=pod,
        seq=seq,
        first_line=before + 1,
        line_count=len(lines),
        text="\n".join(lines),
    )


def text(response: Any) -> str:
    return b"".join(response.streaming_content).decode()


def test_the_whole_log_comes_as_text_in_order(rig: Rig, world: World) -> None:
    add_chunk(rig.job, "train-0", 1, ["a1", "a2"])
    add_chunk(rig.job, "train-1", 1, ["b1"])
    add_chunk(rig.job, "train-0", 2, ["a3"])
    response = api_as(world.bob).get(f"/api/v1/jobs/{rig.job.pk}/logs/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    body = text(response)
    assert body == "==> train-0 <==\na1\na2\na3\n==> train-1 <==\nb1\n"


def test_the_log_of_one_pod_and_its_tail(rig: Rig, world: World) -> None:
    for seq in range(1, 6):
        add_chunk(rig.job, "train-0", seq, [f"line {seq}.{i}" for i in range(3)])
    add_chunk(rig.job, "train-1", 1, ["other pod"])
    client = api_as(world.bob)
    whole = text(client.get(f"/api/v1/jobs/{rig.job.pk}/logs/?pod=train-0")).splitlines()
    assert whole[0] == "line 1.0" and len(whole) == 15
    tail = client.get(f"/api/v1/jobs/{rig.job.pk}/logs/?pod=train-0&tail=4")
    assert text(tail) == "line 4.2\nline 5.0\nline 5.1\nline 5.2\n"


def test_the_download_link_names_a_file(rig: Rig, world: World) -> None:
    response = api_as(world.bob).get(f"/api/v1/jobs/{rig.job.pk}/logs/?download=1")
    assert response["Content-Disposition"] == f'attachment; filename="job-{rig.job.pk}.log"'


def test_a_bad_tail_is_refused_with_the_field(rig: Rig, world: World) -> None:
    response = api_as(world.bob).get(f"/api/v1/jobs/{rig.job.pk}/logs/?tail=0")
    assert response.status_code == 400 and "tail" in response.json()


def test_outsider_cannot_read_job_logs_or_metrics(rig: Rig, world: World) -> None:
    add_chunk(rig.job, "train-0", 1, ["secret"])
    for path in ("logs", "metrics"):
        assert api_as(world.carol).get(f"/api/v1/jobs/{rig.job.pk}/{path}/").status_code == 404


def test_job_metrics_give_minute_history_totals_and_latest(
    rig: Rig, world: World, django_assert_max_num_queries: Any
) -> None:
    minute = (int(time.time()) // 60 - 2) * 60
    post(batch([gpu_sample(i, minute + 5) for i in range(8)]), rig.token)
    post(batch([gpu_sample(i, minute + 65, DCGM_FI_DEV_GPU_UTIL=80) for i in range(8)]), rig.token)
    with django_assert_max_num_queries(6):
        data = api_as(world.bob).get(f"/api/v1/jobs/{rig.job.pk}/metrics/").json()
    assert [g["index"] for g in data["gpus"]] == [0, 1, 2, 3]  # only the job's GPUs
    gpu1 = data["gpus"][1]
    assert gpu1["history"]["t"] == [minute, minute + 60]
    assert gpu1["history"]["util"] == [51, 80]
    assert gpu1["latest"]["DCGM_FI_DEV_GPU_UTIL"] == 80
    assert data["totals"]["util_peak"] == 80 and data["totals"]["gpu_hours"] > 0


def test_team_live_lists_active_jobs_and_usage_in_bounded_queries(
    world: World, django_assert_max_num_queries: Any
) -> None:
    for n in range(10):
        submit_job(world.vision, parse_spec(spec(name=f"job-{n}")), acting_user=world.bob)
    with django_assert_max_num_queries(8):
        response = api_as(world.alice).get("/api/v1/teams/vision/live/")
    data = response.json()
    assert [j["name"] for j in data["jobs"]] == [f"job-{n}" for n in range(10)]
    assert data["jobs"][0]["state"] == "QUEUED" and data["jobs"][0]["queue_priority"] == 100
    assert data["usage"] == [{"gpu_type": "h100-80g", "used": 0, "guaranteed": 16, "limit": 32}]
    assert api_as(world.carol).get("/api/v1/teams/vision/live/").status_code == 404


def _get_over_asgi(path: str, user: Any) -> tuple[int, bytes]:
    from asgiref.sync import async_to_sync
    from channels.testing import ApplicationCommunicator
    from django.test import Client

    from portal.asgi import application

    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": b"",
        "headers": [(b"cookie", cookie), (b"host", b"testserver")],
    }

    async def get() -> tuple[int, bytes]:
        communicator = ApplicationCommunicator(application, scope)
        await communicator.send_input({"type": "http.request", "body": b""})
        start = await communicator.receive_output(10)
        body = b""
        while True:  # as a server reads it: the last message may carry no body at all
            message = await communicator.receive_output(10)
            body += message.get("body", b"")
            if not message.get("more_body"):
                return start["status"], body

    return async_to_sync(get)()


@pytest.mark.django_db(transaction=True)  # the ASGI app reads on its own thread
def test_a_long_log_streams_over_asgi_without_being_read_whole_first(
    rig: Rig, world: World
) -> None:
    import warnings

    for seq in range(1, 601):  # more pieces than one trip to the database thread takes
        add_chunk(rig.job, "train-0", seq, [f"line {seq}"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, body = _get_over_asgi(f"/api/v1/jobs/{rig.job.pk}/logs/", world.bob)
    assert status == 200
    assert body.decode().splitlines() == [f"line {seq}" for seq in range(1, 601)]
    assert not [w for w in caught if "StreamingHttpResponse" in str(w.message)]
