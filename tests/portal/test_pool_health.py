"""The pool checks each PostgreSQL connection before it lends it (`CONN_HEALTH_CHECKS`): ones
PostgreSQL closed while they sat in the pool (a restart, a failover) are replaced, and a request
after every session was dropped is answered. (tests/portal/test_database_away.py terminates the
other sessions from a connection of the same pool, so its pooled connection survives.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.db import connection

from portal.asgi import application
from tenants.tokens import issue_token
from tests.conftest import World


@pytest.fixture
def postgresql(transactional_db: None) -> Iterator[dict[str, Any]]:
    """Connection parameters of the test database, for a session outside the pool."""
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL matter")
    settings = connection.settings_dict
    yield {
        "dbname": settings["NAME"],
        "user": settings["USER"],
        "password": settings["PASSWORD"] or None,
        "host": settings["HOST"],
        "port": settings["PORT"] or None,
    }
    connection.close()
    connection.close_pool()  # type: ignore[attr-defined]


def _pooled_backend() -> int:
    """The backend of the pooled connection the next request takes, handed back to the pool."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    connection.close()
    return int(pid)


def _terminate(params: dict[str, Any], pids: str, *args: object) -> None:
    """End those sessions and wait until they are gone, as a restart does before it is over."""
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(
            f"SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE {pids}", args
        )


def test_connections_postgresql_closed_in_the_pool_are_not_lent(
    postgresql: dict[str, Any],
) -> None:
    before = _pooled_backend()
    _terminate(postgresql, "datname = current_database() AND pid <> pg_backend_pid()")
    assert _pooled_backend() != before  # the pool's others were closed too: not lent either


def test_the_api_answers_once_every_session_was_dropped(
    postgresql: dict[str, Any], world: World
) -> None:
    _, raw = issue_token(world.bob, "cli")
    headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {raw}".encode())]

    def get_me() -> int:
        communicator = HttpCommunicator(application, "GET", "/api/v1/me/", headers=headers)
        return int(async_to_sync(communicator.get_response)(timeout=10)["status"])

    assert get_me() == 200
    _terminate(postgresql, "datname = current_database() AND pid <> pg_backend_pid()")
    assert [get_me() for _ in range(4)] == [200] * 4
