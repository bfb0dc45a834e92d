"""Input no view can handle is refused before any view runs: a 4xx naming the field, never a 500.

Run these on PostgreSQL too: its text columns cannot hold NUL, which SQLite stores silently.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.test import Client

from base.rest import exception_handler
from jobs.models import Job
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db

LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _as(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


def _post_raw(world: World, body: bytes) -> tuple[int, dict[str, list[str]]]:
    response = _as(world.bob).post("/api/v1/jobs/", body, content_type="application/json")
    return response.status_code, response.json()


def test_api_refuses_a_body_over_the_limit_with_413_naming_it(world: World) -> None:
    body = json.dumps(spec(env={"BIG": "x" * LIMIT})).encode()
    response = _as(world.bob).post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {"body": [f"is {len(body)} bytes, the limit is {LIMIT} bytes"]}
    assert Job.objects.for_user(world.admin).count() == 0


def test_form_refuses_a_body_over_the_limit_with_a_plain_413_page(world: World) -> None:
    response = _as(world.bob).post("/jobs/new/", {"team": "vision", "spec_yaml": "x" * LIMIT})
    assert response.status_code == 413
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert f"the limit is {LIMIT} bytes" in response.content.decode()


def test_api_refuses_deeply_nested_json_naming_the_bound(world: World) -> None:
    status, errors = _post_raw(world, b"[" * 100_000 + b"]" * 100_000)
    assert (status, errors) == (400, {"body": ["is nested deeper than 32 levels"]})


def test_api_refuses_json_nested_beyond_the_bound_under_the_field(world: World) -> None:
    deep: object = "x"
    for _ in range(40):
        deep = [deep]
    status, errors = _post_raw(world, json.dumps(spec(args=deep)).encode())
    assert (status, errors) == (400, {"args": ["is nested deeper than 32 levels"]})


@pytest.mark.parametrize("field", ["name", "command", "args", "env", "team", "image"])
def test_api_refuses_a_lone_surrogate_naming_the_field(world: World, field: str) -> None:
    values = {
        "name": "a\ud800",
        "command": ["python", "\ud800"],
        "args": ["\udfff"],
        "env": {"EPOCHS": "\ud83d"},
        "team": "vision\udc00",
        "image": "ubuntu:\ud800",
    }
    body = json.dumps(spec(**{field: values[field]})).encode()  # escapes: "\ud800"
    status, errors = _post_raw(world, body)
    assert (status, errors) == (400, {field: ["must not contain unpaired surrogates"]})
    assert Job.objects.for_user(world.admin).count() == 0


@pytest.mark.parametrize(
    "overrides",
    [
        {"command": ["python", "train\x00.py"]},
        {"args": ["--lr", "\x00"]},
        {"env": {"EPOCHS": "3\x00"}},
        {"env": {"EPO\x00CHS": "3"}},
        {"team": "vision\x00"},
        {"queue": "normal\x00"},
        {"gpu_type": "h100-80g\x00"},
    ],
)
def test_api_refuses_nul_characters_naming_the_field(
    world: World, overrides: dict[str, object]
) -> None:
    response = api_as(world.bob).post("/api/v1/jobs/", spec(**overrides), format="json")
    assert response.status_code == 400
    field = next(iter(overrides))
    assert response.json() == {field: ["must not contain NUL characters"]}
    assert Job.objects.for_user(world.admin).count() == 0


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/v1/jobs/?team=vision%00", "team"),
        ("/api/v1/jobs/?state=QUEUED&team=%00x", "team"),
        ("/api/v1/teams/vision/members/bob%00/", "path"),
        ("/api/v1/teams/vision%00/", "path"),
    ],
)
def test_api_refuses_nul_in_the_path_or_query_naming_it(world: World, url: str, field: str) -> None:
    response = api_as(world.alice).get(url)
    assert response.status_code == 400
    assert response.json() == {field: ["must not contain NUL characters"]}


def test_pages_refuse_nul_in_the_path_or_query_with_a_plain_page(world: World) -> None:
    client = _as(world.alice)
    for url in ("/jobs/?team=%00", "/teams/vision/members/bob%00/"):
        response = client.get(url)
        assert response.status_code == 400
        assert response["Content-Type"] == "text/plain; charset=utf-8"
        assert "must not contain NUL characters" in response.content.decode()


def test_logs_refuse_nul_in_the_pod_before_streaming(world: World) -> None:
    job_id = api_as(world.bob).post("/api/v1/jobs/", spec(), format="json").json()["id"]
    response = api_as(world.bob).get(f"/api/v1/jobs/{job_id}/logs/?pod=train-0%00")
    assert response.status_code == 400
    assert not response.streaming
    assert response.json() == {"pod": ["must not contain NUL characters"]}


def test_api_answers_413_for_a_body_found_too_big_only_as_it_is_read() -> None:
    # Over ASGI a chunked body has no length to refuse up front: Django raises as it reads.
    response = exception_handler(RequestDataTooBig(), {})
    assert response is not None
    assert (response.status_code, response.data) == (
        413,
        {"body": [f"is over the limit of {LIMIT} bytes"]},
    )
