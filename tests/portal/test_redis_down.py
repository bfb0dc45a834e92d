"""Redis away: the API serves from the database, agents' posts are stored, websockets are
refused with 1013 (try again later); Redis back: all of it uses Redis again, no restart.

Redis is "away" at a local port nothing listens on (refused at once: no timeouts to wait for),
and "back" through `RedisSwitch`, a port in front of the test Redis that a test opens.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from base.consumers import TRY_AGAIN_LATER
from base.outage import RETRY_S, WARN_EVERY_S, Outage
from jobs.models import Job
from monitoring.models import GpuMinute
from portal.asgi import application
from tenants.tokens import TokenRateThrottle, issue_token
from tests.conftest import World, spec
from tests.monitoring.conftest import Rig, batch, gpu_sample, post
from tests.monitoring.conftest import rig as rig  # fixture

TIMEOUTS = {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _use_redis_at(settings: Any, port: int) -> None:
    url = f"redis://127.0.0.1:{port}/0"
    prefix = f"down{uuid.uuid4().hex[:8]}"
    settings.CACHES = {
        "default": {
            "BACKEND": "base.cache.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": prefix,
            "OPTIONS": TIMEOUTS,
        }
    }
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "base.channel_layer.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": url, **TIMEOUTS}], "prefix": prefix},
        }
    }


@pytest.fixture
def redis_away(settings: Any) -> None:
    _use_redis_at(settings, _unused_port())


def _outages() -> list[Outage]:
    """The cache's and the channel layer's outage records."""
    layer: Any = get_channel_layer()
    return [cache.outage, layer.outage]  # type: ignore[attr-defined]


def _token_client(world: World) -> APIClient:
    _, raw = issue_token(world.bob, "cli")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def _session_cookie(user: Any) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _websocket(user: Any, path: str) -> WebsocketCommunicator:
    cookie = await database_sync_to_async(_session_cookie)(user)
    return WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://testserver"), (b"cookie", cookie)]
    )


async def _refusal(user: Any, path: str = "/ws/teams/vision/") -> int:
    """The code a websocket is closed with at once, whether before accepting or just after."""
    communicator = await _websocket(user, path)
    accepted, code = await communicator.connect(timeout=5)
    if accepted:
        code = (await communicator.receive_output(timeout=5))["code"]
    await communicator.disconnect()
    return int(code)


async def _first_message(user: Any, path: str) -> dict[str, Any]:
    """What an open websocket sends first (a job's socket: the job's status)."""
    communicator = await _websocket(user, path)
    accepted, code = await communicator.connect(timeout=5)
    assert accepted, code
    message: dict[str, Any] = await communicator.receive_json_from(timeout=5)
    await communicator.disconnect()
    return message


@pytest.mark.usefixtures("redis_away")
def test_token_calls_and_job_submissions_are_served_while_redis_is_away(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    client = _token_client(world)
    assert client.get("/api/v1/me/").json()["username"] == "bob"
    with django_capture_on_commit_callbacks(execute=True):  # the live fan-out is dropped
        submitted = client.post("/api/v1/jobs/", spec(), format="json")
    assert submitted.status_code == 201, submitted.content
    assert Job.objects.for_user(world.bob).filter(pk=submitted.json()["id"]).exists()


@pytest.mark.usefixtures("redis_away")
def test_the_token_throttle_counts_in_the_process_while_redis_is_away(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"token": "2/min"})
    client = _token_client(world)
    assert [client.get("/api/v1/me/").status_code for _ in range(3)] == [200, 200, 429]


@pytest.mark.usefixtures("redis_away")
def test_an_outage_is_logged_once_not_per_request(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    cache.outage.clock = clock  # type: ignore[attr-defined]
    client = _token_client(world)
    with caplog.at_level(logging.WARNING, logger="base.outage"):
        for _ in range(3):
            assert client.get("/api/v1/me/").status_code == 200
            clock.now += RETRY_S  # each request tries Redis again, and finds it away
        clock.now += WARN_EVERY_S
        assert client.get("/api/v1/me/").status_code == 200
    warnings = [r.getMessage() for r in caplog.records if "Redis cache unreachable" in r.message]
    assert len(warnings) == 2, warnings


@pytest.mark.usefixtures("redis_away")
def test_agent_posts_are_stored_while_redis_is_away(rig: Rig) -> None:
    response = post(batch([gpu_sample(i) for i in range(4)]), rig.token)
    assert response.status_code == 202, response.content
    assert GpuMinute.objects.filter(gpu__node=rig.node).count() == 4


@pytest.mark.usefixtures("redis_away")
@pytest.mark.django_db(transaction=True)
def test_a_websocket_is_refused_with_try_again_later_while_redis_is_away(world: World) -> None:
    assert async_to_sync(_refusal)(world.bob) == TRY_AGAIN_LATER


@pytest.mark.usefixtures("redis_away")
@pytest.mark.django_db(transaction=True)
def test_an_outsider_is_still_refused_as_an_outsider_while_redis_is_away(world: World) -> None:
    assert async_to_sync(_refusal)(world.carol) == 4404


class RedisSwitch:
    """A local port in front of the test Redis: closed, connections are refused (Redis away);
    open, they are piped through to Redis."""

    def __init__(self, target_url: str) -> None:
        target = urlsplit(target_url)
        self.target = (target.hostname or "127.0.0.1", target.port or 6379)
        self.port = _unused_port()
        self._sockets: list[socket.socket] = []

    def open(self) -> None:
        server = socket.create_server(("127.0.0.1", self.port))
        self._sockets.append(server)
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def close(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):  # already closed by its other end
                sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked on it
            sock.close()
        self._sockets.clear()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                near, _ = server.accept()
            except OSError:
                return
            far = socket.create_connection(self.target)
            self._sockets += [near, far]
            for source, sink in ((near, far), (far, near)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):  # either end closed
        while data := source.recv(65536):
            sink.sendall(data)


@pytest.fixture
def switch(settings: Any) -> Iterator[RedisSwitch]:
    if not settings.REDIS_URL:
        pytest.skip("Redis coming back needs a Redis")
    switch = RedisSwitch(settings.REDIS_URL)
    _use_redis_at(settings, switch.port)
    yield switch
    switch.close()


@pytest.mark.django_db(transaction=True)
def test_redis_coming_back_is_used_again_without_a_restart(
    world: World, switch: RedisSwitch
) -> None:
    clock = FakeClock()
    for outage in _outages():
        outage.clock = clock
    client = _token_client(world)
    job_id = client.post("/api/v1/jobs/", spec(), format="json").json()["id"]
    path = f"/ws/jobs/{job_id}/"
    assert async_to_sync(_refusal)(world.bob, path) == TRY_AGAIN_LATER
    assert all(outage.away for outage in _outages())

    switch.open()
    clock.now += RETRY_S
    assert client.get("/api/v1/me/").status_code == 200
    assert async_to_sync(_first_message)(world.bob, path)["type"] == "job.status"
    assert not any(outage.away for outage in _outages())
    cache.set("back", "from redis")
    real = urlsplit(settings.REDIS_URL)  # the switch forwards to it; the cache uses db 0
    direct = redis.Redis(host=real.hostname or "127.0.0.1", port=real.port or 6379, db=0)
    assert direct.exists(cache.make_key("back"))
