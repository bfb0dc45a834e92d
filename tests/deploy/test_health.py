"""The probes: /healthz answers while the process lives, /readyz while the database answers (a
cache or channel layer away only logged); neither asks who calls nor says more than it must."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.contenttypes.models import ContentType
from django.db import OperationalError
from django.http import HttpResponse
from django.test import Client, RequestFactory

from base.cache import RedisCache
from base.channel_layer import RedisChannelLayer
from portal import health

# Nothing listens on port 1: a connection is refused at once.
NOWHERE = "redis://127.0.0.1:1/0"
SECRET_DETAIL = "db-7.internal.example:5432 password authentication failed"


def readyz() -> HttpResponse:
    return async_to_sync(health.readyz)(RequestFactory().get("/readyz"))


@pytest.fixture
def database_down(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refused(*args: Any, **kwargs: Any) -> bool:
        raise OperationalError(SECRET_DETAIL)

    monkeypatch.setattr(ContentType.objects, "aexists", refused)


@pytest.mark.django_db
def test_ready_when_database_cache_and_channel_layer_answer() -> None:
    response = readyz()
    assert (response.status_code, response.content) == (200, b"ok")


def test_alive_answers_ok_even_with_the_database_down(database_down: None) -> None:
    response = health.healthz(RequestFactory().get("/healthz"))
    assert (response.status_code, response.content) == (200, b"ok")


def test_not_ready_without_the_database_and_the_answer_names_nothing(
    database_down: None, caplog: pytest.LogCaptureFixture
) -> None:
    response = readyz()
    assert (response.status_code, response.content) == (503, b"not ready")
    assert "database" in caplog.text  # the operator finds which check failed in the log


@pytest.mark.django_db
def test_still_ready_while_the_cache_cannot_reach_redis_and_the_log_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The portal serves without Redis (base.outage): no probe takes every web pod out for it.
    away = RedisCache(NOWHERE, {"OPTIONS": {"socket_connect_timeout": 0.5}})
    monkeypatch.setattr(health, "cache", away)
    response = readyz()
    assert (response.status_code, response.content) == (200, b"ok")
    assert "cache unreachable" in caplog.text


@pytest.mark.django_db
def test_still_ready_while_the_channel_layer_cannot_reach_redis_and_the_log_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    away = RedisChannelLayer(hosts=[{"address": NOWHERE, "socket_connect_timeout": 0.5}])
    monkeypatch.setattr(health, "get_channel_layer", lambda: away)
    response = readyz()
    assert (response.status_code, response.content) == (200, b"ok")
    assert "channel layer unreachable" in caplog.text


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer_anonymous_callers_through_every_middleware(path: str) -> None:
    response = Client().get(path)
    assert (response.status_code, response.content) == (200, b"ok")
    assert "no-cache" in response["Cache-Control"]
    assert not response.cookies  # no session, no CSRF token: nothing for a probe to keep


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_take_no_writes(path: str) -> None:
    assert Client().post(path).status_code == 405
