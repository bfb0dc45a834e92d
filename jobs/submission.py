"""A submission's writes in two statements: the adapter behind `jobs.actions` for the one write
that the ORM makes too dear.

A submission writes the job, its first event and its audit event, and moves the audit chain's
head. Through the ORM that is five statements and the commit, each a round trip to PostgreSQL
and most of them compiled again on every submission: 3.3-3.4 ms of the submitting process's CPU
per submission in the end-to-end replay, against 1.7-1.8 ms when the writes went as one
(`bench/e2e_kueue_baseline.py`, alternating runs; docs/decisions/0005-plain-writes.md). The
replay submits 385 jobs a second on two cores, and with the ORM's writes the submitters fell
behind the scenario by half a minute. Here, on PostgreSQL:

1. the job and its event go in with one statement (data-modifying CTEs, the event taking the
   job's new id), which also locks the chain's head and reads it;
2. the audit event, numbered and hashed after the head in Python (the key never reaches the
   database), goes in with the head's update in a second.

Both run in the caller's transaction, which commits them: no COMMIT in a statement. The tables
and columns come from the models' `_meta`, the values from each field's `pre_save` and
`get_db_prep_save` (the ORM's own conversions), so a renamed or added field changes the
statements with it. SQLite has no data-modifying CTEs and no round trips (a statement is a
function call), so there the same rows go in through the ORM. `tests/jobs/test_submission.py`
is the canary: on PostgreSQL the rows equal those the ORM writes, in two statements, and
writers that race for the head still form one chain.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model

from audit.models import AuditEvent, AuditHead
from audit.record import append, chain, lock_head, require_transaction
from jobs.models import Job, JobEvent


def write_submission(job: Job, event: JobEvent, audit: AuditEvent) -> None:
    """Insert `job`, its first `event` and its `audit` event (its target set to the job),
    chained after the head, in the caller's transaction. Sets the job's and event's ids."""
    require_transaction(audit)
    if connection.vendor != "postgresql":
        write_with_orm(job, event, audit)
        return
    audit.target_type = job._meta.label_lower
    job_values, event_values = _values(job), _values(event, skip="job")
    with connection.cursor() as cursor:
        cursor.execute(_job_and_event(), [*job_values, *event_values])
        job.pk, event.pk, seq, hash_ = cursor.fetchone()
        for saved in (job, event):  # as the ORM's own save leaves them: a later save updates
            saved._state.adding, saved._state.db = False, connection.alias
        event.job = job
        audit.target_id = str(job.pk)
        # No head row where a database was emptied since the migration made it.
        head = lock_head() if seq is None else AuditHead(pk=1, seq=seq, hash=hash_)
        chain(head, [audit])
        cursor.execute(_audit_and_head(), [*_values(audit), head.seq, head.hash])
        if cursor.rowcount != 1:
            raise RuntimeError("the audit chain's head was not moved")


def write_with_orm(job: Job, event: JobEvent, audit: AuditEvent) -> None:
    """The same rows through the ORM: five statements."""
    job.save(force_insert=True)
    event.job = job
    event.save(force_insert=True)
    audit.target_type, audit.target_id = job._meta.label_lower, str(job.pk)
    append([audit])


def _fields(model: type[Model], skip: str | None = None) -> list[Field[Any, Any]]:
    """The columns an insert writes: every concrete field but the automatic id (and `skip`)."""
    return [
        field
        for field in model._meta.concrete_fields
        if not field.primary_key and field.name != skip
    ]


def _values(instance: Model, skip: str | None = None) -> list[Any]:
    db = connections[DEFAULT_DB_ALIAS]  # not the proxy, which looks the connection up each use
    return [
        field.get_db_prep_save(field.pre_save(instance, True), db)
        for field in _fields(type(instance), skip)
    ]


def _names(model: type[Model], skip: str | None = None) -> str:
    return ", ".join(_column(model, f.name) for f in _fields(model, skip))


def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _column(model: type[Model], name: str) -> str:
    field = model._meta.pk if name == "pk" else model._meta.get_field(name)
    assert isinstance(field, Field) and field.column, f"{model.__name__}.{name} has no column"
    return connection.ops.quote_name(field.column)


def _placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)


@cache
def _job_and_event() -> str:
    job_id, event_id = _column(Job, "pk"), _column(JobEvent, "pk")
    head_id = _column(AuditHead, "pk")
    seq, hash_ = _column(AuditHead, "seq"), _column(AuditHead, "hash")
    return f"""
WITH job AS (
    INSERT INTO {_table(Job)} ({_names(Job)}) VALUES ({_placeholders(len(_fields(Job)))})
    RETURNING {job_id}
), event AS (
    INSERT INTO {_table(JobEvent)} ({_names(JobEvent, skip="job")}, {_column(JobEvent, "job")})
    SELECT {_placeholders(len(_fields(JobEvent, skip="job")))}, job.{job_id} FROM job
    RETURNING {event_id}
), head AS (
    SELECT {seq}, {hash_} FROM {_table(AuditHead)} WHERE {head_id} = 1 FOR UPDATE
)
SELECT job.{job_id}, event.{event_id}, head.{seq}, head.{hash_}
FROM job CROSS JOIN event LEFT JOIN head ON TRUE
"""


@cache
def _audit_and_head() -> str:
    seq, hash_ = _column(AuditHead, "seq"), _column(AuditHead, "hash")
    return f"""
WITH audit AS (
    INSERT INTO {_table(AuditEvent)} ({_names(AuditEvent)})
    VALUES ({_placeholders(len(_fields(AuditEvent)))})
)
UPDATE {_table(AuditHead)} SET {seq} = %s, {hash_} = %s WHERE {_column(AuditHead, "pk")} = 1
"""
