"""PostgreSQL binds values on the server and prepares a statement run again and again
(`DATABASES` in the settings: `server_side_binding`, `prepare_threshold`)."""

from __future__ import annotations

import pytest
from django.db import connection

from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")
def test_postgresql_prepares_a_statement_run_again_and_again(world: World) -> None:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    threshold = connection.settings_dict["OPTIONS"]["prepare_threshold"]
    if threshold is None:
        pytest.skip("preparing is turned off here (DB_PREPARE_AFTER=0)")
    for _ in range(threshold + 1):  # each a new query set: one would keep its rows
        query = Job.unscoped.filter(pk=job.pk).values_list("state_reason", flat=True)
        assert list(query) == [job.state_reason]
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [statement for (statement,) in cursor.fetchall()]
    # Bound on the server: the value is a parameter of the prepared statement, not in its text.
    assert any('"state_reason"' in s and "$1" in s for s in prepared), prepared
