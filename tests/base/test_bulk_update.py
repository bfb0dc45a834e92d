"""`update_rows` writes each row's own values, only the fields named, on every backend: the
canary of `base.bulk_update`, the one hand-written write (a Django or driver upgrade that
changes what it relies on fails here)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from base.bulk_update import BATCH_ROWS, statements, update_rows, update_values
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db


def _jobs(world: World, count: int) -> list[Job]:
    return [
        submit_job(world.vision, parse_spec(spec(name=f"job-{i}")), acting_user=world.bob)
        for i in range(count)
    ]


def test_each_row_gets_its_own_values_of_every_type(world: World) -> None:
    jobs = _jobs(world, 3)
    moments = [datetime(2026, 1, i + 1, 12, 0, tzinfo=UTC) for i in range(3)]
    for i, job in enumerate(jobs):
        job.state_reason = f"reason {i} with 'quotes'"
        job.placement = {f"node-{i}": i + 1}  # JSON
        job.estimated_start = moments[i] if i else None  # a timestamp, and NULL
        job.exit_code = i  # an integer
        job.preempted_for = jobs[0] if i == 2 else None  # a foreign key
    assert (
        update_rows(
            jobs, ["state_reason", "placement", "estimated_start", "exit_code", "preempted_for"]
        )
        == 3
    )

    for i, job in enumerate(jobs):
        stored = Job.unscoped.get(pk=job.pk)
        assert stored.state_reason == f"reason {i} with 'quotes'"
        assert stored.placement == {f"node-{i}": i + 1}
        assert stored.estimated_start == (moments[i] if i else None)
        assert stored.exit_code == i
        assert stored.preempted_for_id == (jobs[0].pk if i == 2 else None)


def test_fields_not_named_are_left_alone(world: World) -> None:
    [job] = _jobs(world, 1)
    job.name, job.state_reason = "renamed-in-memory", "written"
    update_rows([job], ["state_reason"])
    stored = Job.unscoped.get(pk=job.pk)
    assert (stored.name, stored.state_reason) == ("job-0", "written")


def test_more_rows_than_one_statement_holds(world: World) -> None:
    jobs = _jobs(world, 2)
    many = [jobs[i % 2] for i in range(BATCH_ROWS + 1)]  # crosses the chunk boundary
    jobs[0].state_reason, jobs[1].state_reason = "first", "second"
    update_rows(many, ["state_reason"])
    assert [Job.unscoped.get(pk=j.pk).state_reason for j in jobs] == ["first", "second"]


def test_nothing_to_write_sends_nothing(world: World) -> None:
    jobs = _jobs(world, 1)
    with CaptureQueriesContext(connection) as queries:
        assert update_rows([], ["state_reason"]) == 0
        assert update_rows(jobs, []) == 0
    assert not queries.captured_queries


def test_rows_that_no_longer_match_the_condition_are_left_alone(world: World) -> None:
    waiting, cancelled = _jobs(world, 2)
    Job.unscoped.filter(pk=cancelled.pk).update(state=State.CANCELLED)

    rows = [[job.pk, "PRIORITY"] for job in (waiting, cancelled)]
    assert update_values(Job, ["pending_code"], rows, where={"state": State.QUEUED}) == 1
    assert Job.unscoped.get(pk=waiting.pk).pending_code == "PRIORITY"
    assert Job.unscoped.get(pk=cancelled.pk).pending_code == ""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner")
def test_postgresql_finds_the_rows_through_the_primary_key(world: World) -> None:
    [job] = _jobs(world, 1)
    copies = [Job(**{**_fields(job), "id": None, "name": f"copy-{i}"}) for i in range(3000)]
    Job.unscoped.bulk_create(copies)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")
        [(sql, params)] = statements(connection, Job, ["state_reason"], [[job.pk, "moved"]])
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(line for (line,) in cursor.fetchall())
    table = Job._meta.db_table
    assert f"{table}_pkey" in plan and f"Seq Scan on {table}" not in plan, plan


def _fields(job: Job) -> dict[str, object]:
    return {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields}


def test_a_controller_batch_of_changes_reads_back_as_saved(world: World) -> None:
    """Every kind of field a state change writes, many rows at once, as `save()` would."""
    jobs = _jobs(world, 3)
    saved = _jobs(world, 1)[0]
    moment = datetime(2026, 5, 1, 8, 0, 0, 123456, tzinfo=UTC)
    for job in (*jobs, saved):
        job.state, job.state_reason, job.admitted_at = State.ADMITTED, "placed", moment
        job.placement, job.attempts, job.k8s_name = {"node-a": 2}, 1, f"job-{job.pk}-1"
        job.pending_figures, job.estimated_start = {"ahead": 1.5, "text": "ünï"}, None
    fields = [
        *("state", "state_reason", "admitted_at", "placement", "attempts", "k8s_name"),
        *("pending_figures", "estimated_start"),
    ]
    update_rows(jobs, fields)
    saved.save(update_fields=fields)
    expected = {f: getattr(Job.unscoped.get(pk=saved.pk), f) for f in fields}
    for job in jobs:
        stored = Job.unscoped.get(pk=job.pk)
        assert {f: getattr(stored, f) for f in fields} == {**expected, "k8s_name": job.k8s_name}
