"""Logs are JSON lines carrying the request id, the user and the team; Sentry only with a DSN;
the client address behind the trusted proxies, in the audit trail and the logs alike."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from audit.models import AuditEvent
from base.client_ip import scope_client_ip
from base.middleware import RequestContext, request_context
from portal.logs import formatter, tag_request_id
from tenants.tokens import issue_token
from tests.conftest import PASSWORD, World

PROXY, CLIENT = "10.0.0.9", "203.0.113.7"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """What the root logger writes, rendered as production renders it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter("json"))
    root = logging.getLogger()
    root.addHandler(handler)
    yield stream
    root.removeHandler(handler)


def _records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.django_db
def test_a_page_s_log_lines_carry_request_id_user_and_team(
    world: World, json_lines: io.StringIO
) -> None:
    outsider = Client()
    outsider.force_login(world.carol)
    answer = outsider.get("/api/v1/teams/vision/members/", headers={"X-Request-ID": "req-42"})
    assert answer.status_code == 404

    (record,) = [r for r in _records(json_lines) if r["logger"] == "django.request"]
    assert record["event"] == "Not Found: /api/v1/teams/vision/members/"
    assert (record["request_id"], record["user"], record["team"]) == ("req-42", "carol", "vision")
    assert record["level"] == "warning" and record["timestamp"].endswith("Z")
    assert "request" not in record  # the request object's repr says nothing more


@pytest.mark.django_db
def test_an_api_token_s_user_is_named_once_authenticated(
    world: World, json_lines: io.StringIO
) -> None:
    _token, raw = issue_token(world.carol, "laptop")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/teams/vision/members/").status_code == 404

    (record,) = [r for r in _records(json_lines) if r["logger"] == "django.request"]
    assert record["user"] == "carol" and len(record["request_id"]) == 32


def test_a_line_outside_any_request_has_no_request_fields(json_lines: io.StringIO) -> None:
    logging.getLogger("portal.test").warning("controller cycle took %d ms", 90)
    (record,) = _records(json_lines)
    assert record["event"] == "controller cycle took 90 ms"
    assert not {"request_id", "user", "team"} & set(record)


def test_sentry_events_name_the_request_id() -> None:
    with request_context(RequestContext("req-7", None)):
        event = tag_request_id({"tags": {"role": "web"}}, {})
    assert event["tags"] == {"role": "web", "request_id": "req-7"}
    assert tag_request_id({}, {}) == {}


def _sentry_client(**env: str) -> str:
    code = (
        "import portal.settings, sentry_sdk; c = sentry_sdk.get_client(); "
        "print(c.is_active(), c.options.get('environment'), c.options.get('send_default_pii'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**_environ(), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SENTRY_")}


def test_sentry_starts_only_with_a_dsn() -> None:
    assert _sentry_client() == "False None None"
    dsn = "http://public-key@127.0.0.1:9/1"  # nothing is sent: no error happens in the run
    assert _sentry_client(SENTRY_DSN=dsn) == "True demo False"


@pytest.mark.django_db
@pytest.mark.parametrize(("proxies", "recorded"), [(1, CLIENT), (0, PROXY)])
def test_the_audit_records_the_client_behind_the_trusted_proxy(
    world: World, settings: Any, proxies: int, recorded: str
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": proxies}
    browser = Client(REMOTE_ADDR=PROXY)
    forged = f"198.51.100.1, {CLIENT}"  # the client's own entry first: believed by nobody
    answer = browser.post(
        "/accounts/login/",
        {"username": "bob", "password": PASSWORD},
        headers={"X-Forwarded-For": forged},
    )
    assert answer.status_code == 302
    login = AuditEvent.objects.for_user(world.admin).filter(action="auth.login").get()
    assert login.ip == recorded


def test_an_asgi_connection_s_client_is_read_the_same_way(settings: Any) -> None:
    scope = {"client": (PROXY, 5000), "headers": [(b"x-forwarded-for", CLIENT.encode())]}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    assert scope_client_ip(scope) == CLIENT
    assert scope_client_ip({**scope, "headers": [(b"x-forwarded-for", b"junk")]}) == PROXY
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 0}
    assert scope_client_ip(scope) == PROXY
