"""The API against its own OpenAPI schema: requests generated from it, sent as a signed-in member,
never meet a server error, and every status answered is one the schema documents.

The schema is read from the app (`/api/schema/`) and the requests go to it in-process (WSGI),
in the test's database; the examples are few and drawn from a fixed seed, so a run is short
and the same each time.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from tenants.tokens import issue_token
from tests.conftest import World

CONFIG = {
    "seed": 18,
    "phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}},
    "generation": {"max-examples": 10, "deterministic": True, "database": "none"},
    "checks": {
        "enabled": False,
        "not_a_server_error": {"enabled": True},
        "status_code_conformance": {"enabled": True},
    },
}


# Read at collection, outside any test's database: the schema's generation reads none.
# (`schemathesis.pytest.from_fixture` would read it inside one, but its runner sets pytest's
# private `Function._nodeid`, which pytest 9.2 no longer has.)
schema = schemathesis.openapi.from_wsgi(
    "/api/schema/", get_wsgi_application(), config=schemathesis.Config.from_dict(CONFIG)
)


@pytest.fixture(autouse=True)
def _connection_kept_open() -> Iterator[None]:
    """The WSGI handler closes the database connection after each request, and the test's
    transaction lives on it: keep it open, as Django's test client does."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def member_token(world: World) -> str:
    """An API token of bob, a member of team vision."""
    return issue_token(world.bob, "schemathesis")[1]


@schema.parametrize()
# The examples share one database on purpose, as the API's clients do.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_generated_requests_meet_no_server_error_and_only_documented_statuses(
    case: schemathesis.Case, member_token: str
) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {member_token}"})
