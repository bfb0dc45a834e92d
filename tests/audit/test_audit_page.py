"""The audit page: targets by name with a link, changes as a before/after table, a bad date
answered 400 naming the field (page and CSV), members seeing the events about their own jobs,
and the admins' chain check giving `audit_verify`'s verdict."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from audit.models import AuditEvent
from jobs.actions import cancel_job, submit_job
from jobs.spec import parse_spec
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db


def _as(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


def test_targets_show_by_name_with_a_link_and_changes_as_a_table(world: World) -> None:
    job = submit_job(world.vision, parse_spec(spec(name="named-job")), acting_user=world.bob)
    cancel_job(job, acting_user=world.alice)
    page = _as(world.alice).get("/audit/?action=job.").content.decode()
    assert f'<a href="/jobs/{job.pk}/">named-job</a>' in page
    assert "jobs.job" not in page  # no internal type names
    assert '<table class="change">' in page
    assert (
        '<tr class="changed"><td>state</td><td><code>QUEUED</code></td><td><code>CANCELLED</code>'
        in page
    )


@pytest.mark.parametrize("query", ["since=2026-13-45", "until=yesterday"])
def test_a_bad_date_answers_400_naming_the_field(world: World, query: str) -> None:
    field = query.split("=")[0]
    page = _as(world.alice).get(f"/audit/?{query}")
    assert page.status_code == 400
    assert f'id="audit-{field}-error"' in page.content.decode()
    export = _as(world.alice).get(f"/audit/export.csv?{query}")
    assert export.status_code == 400 and export.content.decode().startswith(f"{field}: ")


def test_members_see_the_events_of_their_own_jobs_only(world: World) -> None:
    submit_job(world.vision, parse_spec(spec(name="bobs-job")), acting_user=world.bob)
    submit_job(world.vision, parse_spec(spec(name="alices-job")), acting_user=world.alice)
    page = _as(world.bob).get("/audit/").content.decode()
    assert "bobs-job" in page and "alices-job" not in page
    assert "alices-job" in _as(world.alice).get("/audit/").content.decode()  # the lead: all


def test_admin_verifies_the_chain_and_sees_it_broken_after_tampering(world: World) -> None:
    submit_job(world.vision, parse_spec(spec(name="chained")), acting_user=world.bob)
    admin = _as(world.admin)
    intact = admin.post("/audit/verify/").content.decode()
    assert "The audit chain is intact." in intact and "audit chain OK" in intact
    event = AuditEvent.objects.for_user(world.admin).get(action="job.submit")
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    with connection.cursor() as cursor:  # what an intruder with database access would do
        cursor.execute(f"UPDATE {table} SET actor_name = 'mallory' WHERE seq = %s", [event.seq])
    broken = admin.post("/audit/verify/").content.decode()
    assert "The audit chain is BROKEN." in broken and f"seq={event.seq}" in broken


def test_verifying_the_chain_is_for_admins_only(world: World) -> None:
    response = _as(world.alice).post("/audit/verify/")
    assert response.status_code == 403
    assert "for platform admins" in response.content.decode()
    assert "Verify the chain" not in _as(world.alice).get("/audit/").content.decode()
