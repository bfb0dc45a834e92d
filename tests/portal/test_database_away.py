"""PostgreSQL dropping the web process's connections (a restart, a failover) costs no more
than the requests in flight: the next request opens a new connection and is answered."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.db import connection, connections

from portal.asgi import application
from tenants.tokens import issue_token
from tests.conftest import World

pytestmark = pytest.mark.django_db(transaction=True)


def _get_me(token: str) -> int:
    """GET /api/v1/me/ through the ASGI application, as the web server calls it."""
    headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {token}".encode())]
    communicator = HttpCommunicator(application, "GET", "/api/v1/me/", headers=headers)
    response = async_to_sync(communicator.get_response)(timeout=10)
    return int(response["status"])


def _drop_every_other_connection() -> int:
    """Terminate every other session of the test database, as a PostgreSQL restart does."""
    admin = connections.create_connection("default")
    try:
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            (dropped,) = cursor.fetchone()
        return int(dropped)
    finally:
        admin.close()


def test_the_api_answers_again_once_postgresql_dropped_its_connections(world: World) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL matter")
    _, raw = issue_token(world.bob, "cli")
    assert _get_me(raw) == 200
    assert _drop_every_other_connection() >= 1
    assert [_get_me(raw) for _ in range(4)] == [200] * 4
    # The test's own session went too: a fresh one for the flush after the test.
    connection.close()
    connection.close_pool()  # type: ignore[attr-defined]
