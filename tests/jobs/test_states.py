"""The job state machine: allowed moves, refused moves, a JobEvent for every move, and an
audit event for every move the cluster makes."""

from __future__ import annotations

import pytest
from django.db import transaction

from audit import record as audit
from audit.models import AuditEvent
from jobs.actions import submit_job
from jobs.models import State
from jobs.spec import parse_spec
from jobs.states import ALLOWED, IllegalTransition, batch, transition
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
    # Batched in one transaction, as the controller writes them (`cluster.observe.writing`).
    with transaction.atomic(), audit.batch(), batch():
        for state in (State.ADMITTED, State.RUNNING, State.NODE_FAILED, State.QUEUED):
            transition(job, state, f"to {state}")
        for state in (State.ADMITTED, State.RUNNING, State.SUCCEEDED):
            transition(job, state, f"to {state}")
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
