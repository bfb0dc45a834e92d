"""The job state machine: allowed moves, refused moves, a JobEvent for every move, and an
audit event for every move the cluster makes."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent, AuditHead
from jobs.actions import submit_job
from jobs.models import Job, JobEvent, State
from jobs.spec import parse_spec
from jobs.states import ALLOWED, IllegalTransition, Moves, transition
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db


def test_it_walks_a_job_to_success_with_an_event_per_step(world: World) -> None:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    transition(job, State.ADMITTED, "admitted on node-1")
    transition(job, State.RUNNING, "pod running")
    transition(job, State.SUCCEEDED, "exit code 0")
    job.refresh_from_db()
    assert job.state == State.SUCCEEDED
    assert job.admitted_at and job.started_at and job.finished_at
    steps = [(e.from_state, e.to_state, e.reason) for e in job.events.all()]
    assert steps == [
        ("", "QUEUED", "job.submit"),
        ("QUEUED", "ADMITTED", "admitted on node-1"),
        ("ADMITTED", "RUNNING", "pod running"),
        ("RUNNING", "SUCCEEDED", "exit code 0"),
    ]


@pytest.mark.parametrize("via", [State.PREEMPTED, State.NODE_FAILED])
def test_preempted_and_node_failed_jobs_go_back_to_the_queue(world: World, via: str) -> None:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    job.placement = {"node-1": 1}
    transition(job, State.ADMITTED, "admitted")
    transition(job, State.RUNNING, "running")
    transition(job, via, "reclaimed")
    transition(job, State.QUEUED, "requeued")
    job.refresh_from_db()
    assert (job.state, job.placement, job.started_at) == (State.QUEUED, {}, None)


def test_it_refuses_moves_the_machine_does_not_allow(world: World) -> None:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    with pytest.raises(IllegalTransition, match="QUEUED → RUNNING is not allowed"):
        transition(job, State.RUNNING, "skipping admission")
    transition(job, State.CANCELLED, "user")
    for target in State:
        with pytest.raises(IllegalTransition):
            transition(job, target, "after the end")


def test_each_move_the_cluster_makes_is_audited_with_the_jobs_team(world: World) -> None:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    # Through one unit of work, as the controller writes them (`cluster.observe.writing`).
    with transaction.atomic():
        moves = Moves()
        for state in (State.ADMITTED, State.RUNNING, State.NODE_FAILED, State.QUEUED):
            transition(job, state, f"to {state}", moves=moves)
        for state in (State.ADMITTED, State.RUNNING, State.SUCCEEDED):
            transition(job, state, f"to {state}", moves=moves)
        moves.flush()
    failed = submit_job(world.nlp, parse_spec(spec(team="nlp")), acting_user=world.carol)
    transition(failed, State.ADMITTED, "admitted")  # and one at a time, unbatched
    transition(failed, State.FAILED, "image pull failed")

    def audited(job_id: int) -> list[tuple[str, int | None, object]]:
        events = AuditEvent.chain.filter(target_type="jobs.job", target_id=str(job_id))
        return [(e.action, e.team_id, e.after) for e in events.order_by("seq")]

    vision, nlp = world.vision.pk, world.nlp.pk
    assert audited(job.pk)[1:] == [  # after its submission
        ("job.running", vision, {"reason": "to RUNNING"}),
        ("job.node_lost", vision, {"reason": "to NODE_FAILED"}),
        ("job.running", vision, {"reason": "to RUNNING"}),
        ("job.succeeded", vision, {"reason": "to SUCCEEDED"}),
    ]
    assert audited(failed.pk)[1:] == [("job.failed", nlp, {"reason": "image pull failed"})]


def test_terminal_states_have_no_way_out() -> None:
    assert all(not ALLOWED[s] for s in (State.SUCCEEDED, State.FAILED, State.CANCELLED))


def test_moves_are_written_at_the_flush_with_the_audit_head_locked_last(world: World) -> None:
    jobs = [submit_job(world.vision, parse_spec(spec()), acting_user=world.bob) for _ in range(3)]
    with transaction.atomic():
        moves = Moves()
        for job in jobs:
            transition(job, State.ADMITTED, "admitted", moves=moves)
            transition(job, State.RUNNING, "running", moves=moves)
        assert not Job.unscoped.filter(state=State.RUNNING).exists()  # held until the flush
        with CaptureQueriesContext(connection) as queries:
            moves.flush()
    head = AuditHead._meta.db_table
    sent = [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]
    locked = next(i for i, sql in enumerate(sent) if head in sql)
    assert any(Job._meta.db_table in sql for sql in sent[:locked])
    assert all(head in sql or AuditEvent._meta.db_table in sql for sql in sent[locked:]), sent
    assert len(sent) <= 6  # one UPDATE per set of fields, one INSERT each for events and audit
    running = Job.unscoped.filter(state=State.RUNNING).values_list("id", flat=True)
    assert sorted(running) == sorted(job.pk for job in jobs)
    assert JobEvent.unscoped.filter(to_state=State.RUNNING).count() == 3
    assert AuditEvent.chain.filter(action="job.running").count() == 3


def test_a_failed_transaction_writes_none_of_its_moves(world: World) -> None:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)

    class Failed(Exception):
        pass

    with pytest.raises(Failed), transaction.atomic():
        moves = Moves()
        transition(job, State.ADMITTED, "admitted", moves=moves)
        transition(job, State.RUNNING, "running", moves=moves)
        moves.flush()
        raise Failed

    assert Job.unscoped.get(pk=job.pk).state == State.QUEUED
    assert not JobEvent.unscoped.filter(job=job, to_state=State.RUNNING).exists()
    assert not AuditEvent.chain.filter(action="job.running").exists()


def test_a_job_moves_through_one_object_only(world: World) -> None:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    with transaction.atomic():
        moves = Moves()
        transition(job, State.ADMITTED, "admitted", moves=moves)
        with pytest.raises(RuntimeError, match="two different objects"):
            transition(Job.unscoped.get(pk=job.pk), State.CANCELLED, "user", moves=moves)
