"""The job state machine: allowed moves, refused moves, and a JobEvent for every move."""

from __future__ import annotations

import pytest

from jobs.actions import submit_job
from jobs.models import State
from jobs.spec import parse_spec
from jobs.states import ALLOWED, IllegalTransition, transition
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


def test_terminal_states_have_no_way_out() -> None:
    assert all(not ALLOWED[s] for s in (State.SUCCEEDED, State.FAILED, State.CANCELLED))
