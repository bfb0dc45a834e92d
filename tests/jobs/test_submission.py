"""Canary of `jobs.submission`: its two hand-written statements write what the ORM writes, and
writers racing for the audit chain's head still form one chain (PostgreSQL, where they run)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.forms.models import model_to_dict

from audit.models import AuditEvent
from audit.record import audit_event
from jobs.actions import submit_job
from jobs.models import Job, JobEvent, State
from jobs.spec import parse_spec
from jobs.submission import write_submission, write_with_orm
from tests.conftest import World, spec

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the statements run on PostgreSQL only"
)
MOVING = {"id", "seq", "at", "prev_hash", "hash", "target_id", "job", "submitted_at"}


def _rows(world: World, write: Callable[[Job, JobEvent, AuditEvent], None]) -> dict[str, Any]:
    job = Job(
        team=world.vision,
        owner=world.bob,
        queue=world.vision_normal,
        gpu_type=world.h100,
        name="canary",
        image="registry.example/vision/train:1.0",
        command=["python", "train.py", "--lr", "3e-4"],
        args=["--resume"],
        env={"SEED": "7", "NOTE": "中文 and quotes ' \""},
        gpus_per_node=2,
        nodes=2,
        cpu=Decimal("7.5"),
        memory="64Gi",
        max_runtime=3600,
    )
    event = JobEvent(team=world.vision, job=job, to_state=State.QUEUED, reason="job.submit")
    audit = audit_event("job.submit", actor=world.bob, team=world.vision, after={"n": 1.5})
    with transaction.atomic():
        write(job, event, audit)
    stored_job = Job.unscoped.get(pk=job.pk)
    stored_event = JobEvent.unscoped.get(job=stored_job)
    stored_audit = AuditEvent.chain.get(target_id=str(job.pk))
    assert (stored_event.pk, stored_audit.target_type) == (event.pk, "jobs.job")
    return {
        "job": {k: v for k, v in model_to_dict(stored_job).items() if k not in MOVING},
        "event": {k: v for k, v in model_to_dict(stored_event).items() if k not in MOVING},
        "audit": {k: v for k, v in model_to_dict(stored_audit).items() if k not in MOVING},
    }


@on_postgresql
@pytest.mark.django_db
def test_the_statements_write_the_rows_the_orm_writes(world: World) -> None:
    by_orm, by_statements = _rows(world, write_with_orm), _rows(world, write_submission)
    assert by_statements == by_orm
    assert by_statements["job"]["state"] == State.QUEUED  # the model's defaults went in too
    call_command("audit_verify", stdout=StringIO())  # raises on a broken link


@pytest.mark.django_db
def test_a_submitted_job_is_the_audit_events_target(world: World) -> None:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    event = AuditEvent.chain.get(action="job.submit")
    assert (event.target_type, event.target_id, event.team_slug) == (
        "jobs.job",
        str(job.pk),
        "vision",
    )
    assert job.events.get().reason == "job.submit"


def _wait_until(condition: Callable[[], bool]) -> None:
    """Poll a condition another thread brings about; the bound only ends a broken run."""
    for _ in range(6000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("the condition never held")


def _waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return bool(cursor.fetchone()[0])


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_writers_racing_for_the_head_form_one_chain(world: World) -> None:
    """B's statement waits on the head A holds; once A commits, B chains after A's event."""
    holding, release = threading.Event(), threading.Event()
    jobs: dict[str, Job] = {}
    errors: list[BaseException] = []

    def run(name: str, hold: bool) -> None:
        try:
            with transaction.atomic():
                jobs[name] = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
                if hold:
                    holding.set()
                    release.wait(60)
        except BaseException as error:  # reported by the test below
            errors.append(error)
        finally:
            connections.close_all()

    first = threading.Thread(target=run, args=("a", True))
    first.start()
    _wait_until(holding.is_set)
    second = threading.Thread(target=run, args=("b", False))
    second.start()
    _wait_until(_waiting_for_a_lock)
    release.set()
    first.join(60)
    second.join(60)
    assert errors == []
    a, b = (AuditEvent.chain.get(target_id=str(jobs[n].pk)) for n in ("a", "b"))
    assert (b.seq, b.prev_hash) == (a.seq + 1, a.hash)
    call_command("audit_verify", stdout=StringIO())
