"""`update_rows` writes each row's own values, only the fields named, and `insert_rows` adds
rows as a save would, on every backend."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import AuditEvent
from jobs.actions import submit_job
from jobs.models import Job, JobEvent, State
from jobs.spec import parse_spec
from portal.bulk import (
    BATCH_ROWS,
    execute_later,
    insert_rows,
    statements,
    together,
    transaction_together,
    update_rows,
)
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
    for job in (waiting, cancelled):
        job.pending_code = "PRIORITY"

    assert update_rows([waiting, cancelled], ["pending_code"], where={"state": State.QUEUED}) == 1
    assert Job.unscoped.get(pk=waiting.pk).pending_code == "PRIORITY"
    assert Job.unscoped.get(pk=cancelled.pk).pending_code == ""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner")
def test_postgresql_finds_the_rows_through_the_primary_key(world: World) -> None:
    [job] = _jobs(world, 1)
    copies = [Job(**{**_fields(job), "id": None, "name": f"copy-{i}"}) for i in range(3000)]
    Job.unscoped.bulk_create(copies)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
        [(sql, params)] = statements(connection, Job, ["state_reason"], [[job.pk, "moved"]])
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert "jobs_job_pkey" in plan and "Seq Scan on jobs_job" not in plan, plan


def test_inserted_rows_read_back_as_saved_ones(world: World) -> None:
    moment = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=UTC)
    events = [
        AuditEvent(
            seq=10_000 + i,
            at=moment,
            actor_id=world.bob.pk if i else None,  # NULL, and a value
            team_slug="vision",
            action="test.insert",
            target_id=f"it's row {i}",  # quoting
            before=None if i else {"nested": [1, "two", None]},  # SQL NULL, and JSON
            after={"row": i, "text": "ünïcode"},
            prev_hash="p" * 64,
            hash=f"{i:064d}",
        )
        for i in range(BATCH_ROWS + 2)  # crosses the chunk boundary
    ]
    insert_rows(events)

    stored = list(AuditEvent.chain.filter(action="test.insert").order_by("seq"))
    assert len(stored) == BATCH_ROWS + 2
    for i, row in enumerate(stored):
        assert (row.seq, row.at, row.target_id, row.hash) == (
            10_000 + i,
            moment,
            f"it's row {i}",
            f"{i:064d}",
        )
        assert row.actor_id == (world.bob.pk if i else None)
        assert row.before == (None if i else {"nested": [1, "two", None]})
        assert row.after == {"row": i, "text": "ünïcode"}


def test_inserted_rows_get_what_a_save_fills_in(world: World) -> None:
    [job] = _jobs(world, 1)
    before = timezone.now()
    insert_rows([JobEvent(team_id=job.team_id, job=job, to_state=State.ADMITTED, reason="r")])
    event = JobEvent.unscoped.filter(job=job, to_state=State.ADMITTED).get()
    assert event.job_id == job.pk and event.at >= before  # the foreign key, auto_now_add
    with CaptureQueriesContext(connection) as queries:
        insert_rows([])
    assert not queries.captured_queries


def _fields(job: Job) -> dict[str, object]:
    return {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields}


def _events(job: Job, count: int) -> list[JobEvent]:
    return [
        JobEvent(team=job.team, job=job, to_state=State.QUEUED, reason=f"held {i}")
        for i in range(count)
    ]


def test_writes_held_together_go_in_at_the_end_of_the_block(world: World) -> None:
    (job,) = _jobs(world, 1)
    held = JobEvent.unscoped.filter(reason__startswith="held")
    with transaction.atomic():
        with CaptureQueriesContext(connection) as queries, together():
            insert_rows(_events(job, 2))
            execute_later(
                f"UPDATE {Job._meta.db_table} SET state_reason = %s WHERE id = %s",
                ["written with them", job.pk],
            )
            seen_inside = held.count()
        job.refresh_from_db()
        assert held.count() == 2 and job.state_reason == "written with them"

    writes = [q["sql"] for q in queries if not q["sql"].startswith("SELECT")]
    if connection.vendor == "postgresql":
        # Nothing was sent until the block ended, then all of it at once.
        assert seen_inside == 0
        assert len(writes) == 1 and writes[0].count("; ") == 1
    else:  # elsewhere as they come
        assert seen_inside == 2 and len(writes) == 2


def test_held_writes_are_dropped_with_the_block_that_failed(world: World) -> None:
    (job,) = _jobs(world, 1)

    class Failed(Exception):
        pass

    held = JobEvent.unscoped.filter(reason__startswith="held")
    with pytest.raises(Failed), transaction.atomic(), together():
        with together():  # an inner block joins the outer one: nothing is sent at its end
            insert_rows(_events(job, 1))
        assert held.exists() is (connection.vendor != "postgresql")
        raise Failed

    assert not held.exists()


postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="only PostgreSQL holds writes"
)


@postgresql_only
@pytest.mark.django_db(transaction=True)  # the transaction must be the outermost one
def test_the_last_held_writes_go_with_the_commit_in_one_round_trip(world: World) -> None:
    (job,) = _jobs(world, 1)
    held = JobEvent.unscoped.filter(reason__startswith="held")
    with CaptureQueriesContext(connection) as queries, transaction_together():
        with together():
            insert_rows(_events(job, 1))
        seen = held.count()  # a statement after them: the waiting writes go first
        with together():
            insert_rows(_events(job, 2))

    assert seen == 1 and held.count() == 3
    inserted, counted, committed = [q["sql"] for q in queries if "held" in q["sql"]]
    assert inserted.startswith("INSERT") and "COMMIT" not in inserted
    assert counted.startswith("SELECT")
    assert committed.startswith("INSERT") and committed.endswith("; COMMIT")


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_writes_waiting_for_the_commit_are_dropped_with_a_failed_transaction(
    world: World,
) -> None:
    (job,) = _jobs(world, 1)

    class Failed(Exception):
        pass

    with pytest.raises(Failed), transaction_together():
        with together():
            insert_rows(_events(job, 1))
        raise Failed

    assert not JobEvent.unscoped.filter(reason__startswith="held").exists()


@postgresql_only
def test_inside_another_transaction_nothing_commits_early(world: World) -> None:
    (job,) = _jobs(world, 1)
    outer = transaction.atomic()
    with CaptureQueriesContext(connection) as queries, outer, transaction_together(), together():
        insert_rows(_events(job, 1))

    assert [q for q in queries if "COMMIT" in q["sql"]] == []
    assert JobEvent.unscoped.filter(reason__startswith="held").count() == 1


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_submission_locks_the_audit_head_for_two_round_trips(world: World) -> None:
    _jobs(world, 1)  # the chain's head exists (a flushed database has none until then)
    with CaptureQueriesContext(connection) as queries:
        job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)

    sent = [q["sql"] for q in queries if q["sql"] != "COMMIT"]  # Django's own, then a no-op
    head = next(i for i, sql in enumerate(sent) if sql.startswith("UPDATE audit_audithead"))
    assert len(sent[head + 1 :]) == 1 and sent[-1].endswith("; COMMIT")
    assert AuditEvent.chain.filter(action="job.submit", target_id=str(job.pk)).exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")
def test_postgresql_prepares_a_statement_run_again_and_again(world: World) -> None:
    (job,) = _jobs(world, 1)
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
