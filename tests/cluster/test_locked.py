"""`LockedJobs` reads jobs and their related rows in one statement and holds their rows."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from cluster.locked import LockedJobs
from cluster.observe import REPORT_FIELDS
from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from tests.conftest import World, spec


def _jobs(world: World) -> list[Job]:
    return [
        submit_job(world.vision, parse_spec(spec(name="a", env={"K": "v"})), acting_user=world.bob),
        submit_job(world.vision, parse_spec(spec(name="b")), acting_user=world.bob),
        submit_job(
            world.nlp, parse_spec(spec(name="c", team="nlp", queue="low")), acting_user=world.carol
        ),
    ]


def _reads(job: Job) -> dict[str, Any]:
    """Every field of the job, and what its status messages read of its related rows."""
    return {
        **{f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields},
        "team.slug": job.team.slug,
        "owner.username": job.owner.username,
        "queue.name": job.queue.name,
        "queue.priority": job.queue.priority,
        "gpu_type.name": job.gpu_type.name,
    }


def _as_orm_reads(job_id: int) -> dict[str, Any]:
    return _reads(Job.unscoped.select_related("team", "owner", "queue", "gpu_type").get(pk=job_id))


@pytest.mark.django_db
@pytest.mark.parametrize("only", [(), REPORT_FIELDS], ids=["whole", "report-fields"])
def test_locked_jobs_read_as_the_orm_reads_them(world: World, only: tuple[str, ...]) -> None:
    jobs = _jobs(world)
    ids = [job.pk for job in jobs]
    expected = {job_id: _as_orm_reads(job_id) for job_id in ids}

    with transaction.atomic():
        locked = LockedJobs(only)
        with CaptureQueriesContext(connection) as queries:
            locked.lock([*ids, 999_999])
            loaded = [locked.get(job_id) for job_id in ids]
        assert len(queries) == 1  # every job and its related rows in one statement
        assert locked.get(999_999) is None
        # Fields left out are read when first used, as with the ORM's only().
        assert {job.pk: _reads(job) for job in loaded if job} == expected


@pytest.mark.django_db
def test_locking_what_is_locked_already_sends_nothing(world: World) -> None:
    jobs = _jobs(world)
    with transaction.atomic():
        locked = LockedJobs(REPORT_FIELDS)
        locked.lock(job.pk for job in jobs)
        with CaptureQueriesContext(connection) as queries:
            locked.lock(job.pk for job in jobs)
            locked.get(jobs[0].pk)
        assert len(queries) == 0


@pytest.mark.django_db(transaction=True)
def test_the_rows_stay_locked_until_the_transaction_ends(world: World) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite locks the whole database")
    (job, *_) = _jobs(world)
    settings = connection.settings_dict
    other = psycopg.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        host=settings["HOST"],
        port=settings["PORT"] or 5432,
        autocommit=True,
    )
    table = Job._meta.db_table
    nowait = f"SELECT id FROM {table} WHERE id = %s FOR UPDATE NOWAIT"
    try:
        with transaction.atomic():
            LockedJobs(REPORT_FIELDS).lock([job.pk])
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute(nowait, [job.pk])
            # FOR NO KEY UPDATE: a row that refers to the job (a log chunk) can still go in.
            other.execute(f"SELECT id FROM {table} WHERE id = %s FOR KEY SHARE NOWAIT", [job.pk])
        assert other.execute(nowait, [job.pk]).fetchone() == (job.pk,)
    finally:
        other.close()
