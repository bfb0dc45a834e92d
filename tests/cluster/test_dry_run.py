"""The dry run: the same 400s as a submission, the reason and estimate it would get, no writes."""

from __future__ import annotations

from typing import Any

import pytest

from audit.models import AuditEvent
from cluster.models import Node
from jobs.actions import submit_job
from jobs.models import Job, State, Sweep
from jobs.spec import parse_spec
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db
URL = "/api/v1/jobs/dry-run/"


def _node(world: World, name: str = "n1", gpus: int = 8) -> None:
    Node.objects.create(
        name=name, gpu_type=world.h100, gpu_capacity=gpus, gpu_allocatable=gpus, ready=True
    )


def _written() -> tuple[int, int, int]:
    return Job.unscoped.count(), Sweep.unscoped.count(), AuditEvent.chain.count()


def test_a_job_that_fits_would_start_now_and_nothing_is_written(world: World) -> None:
    _node(world)
    before = _written()
    answer = api_as(world.bob).post(URL, spec(gpus_per_node=4), format="json")
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["starts_now"] is True and body["placement"] == {"n1": 4}
    assert body["fits"]["quota"] == {
        "gpu_type": "h100-80g",
        "used": 0,
        "requested": 4,
        "guaranteed": 16,
        "limit": 32,
        "fits": True,
        "within_guarantee": True,
    }
    assert _written() == before


def test_a_job_over_the_teams_quota_now_gets_that_reason_and_an_estimate(world: World) -> None:
    for name in ("n1", "n2", "n3"):
        _node(world, name)
    running = [
        submit_job(world.vision, parse_spec(spec(gpus_per_node=8)), acting_user=world.alice)
        for _ in range(2)
    ]
    for job, node in zip(running, ("n1", "n2"), strict=True):
        Job.unscoped.filter(pk=job.pk).update(state=State.RUNNING, placement={node: 8})
    Job.unscoped.filter(pk__in=[j.pk for j in running]).update(started_at=running[0].submitted_at)
    answer = api_as(world.bob).post(URL, spec(gpus_per_node=8, nodes=3), format="json")
    assert answer.status_code == 200, answer.json()
    answer = answer.json()
    assert answer["starts_now"] is False
    assert answer["fits"]["quota"]["used"] == 16 and answer["fits"]["quota"]["fits"] is False
    assert answer["reason"]["code"] == "QUOTA_EXHAUSTED"
    assert "uses 16 of limit 32" in answer["reason"]["message"]
    assert answer["estimated_start"]["latest"] is not None


@pytest.mark.parametrize(
    "bad",
    [
        {"gpus_per_node": 16},
        {"queue": "nope"},
        {"image": "docker.io/other/x:1"},
        {"name": "Bad Name"},
        {"nodes": 5, "gpus_per_node": 8},
    ],
)
def test_a_bad_spec_gets_the_same_400_as_a_submission(
    world: World, bad: dict[str, Any], settings: Any
) -> None:
    world.vision.image_allowlist = "registry.example/"
    world.vision.save()
    before = _written()
    submitted = api_as(world.bob).post("/api/v1/jobs/", spec(**bad), format="json")
    tried = api_as(world.bob).post(URL, spec(**bad), format="json")
    assert submitted.status_code == tried.status_code == 400
    assert tried.json() == submitted.json()
    assert _written() == before


def test_an_outsider_naming_another_team_is_not_found(world: World) -> None:
    assert api_as(world.carol).post(URL, spec(team="vision"), format="json").status_code == 404
    assert api_as(None).post(URL, spec(), format="json").status_code == 401


def test_a_sweep_dry_run_counts_its_members_and_those_that_would_start(world: World) -> None:
    _node(world)
    body = {**spec(gpus_per_node=2), "sweep": {"array": 6, "max_parallel": 3}}
    answer = api_as(world.bob).post(URL, body, format="json").json()
    assert answer["sweep"]["members"] == 6 and answer["sweep"]["starting_now"] == 3
    assert answer["fits"]["quota"]["requested"] == 12
    refused = api_as(world.bob).post(URL, {**body, "sweep": {"array": 0}}, format="json")
    assert refused.status_code == 400 and "sweep.array" in refused.json()
    assert not Sweep.unscoped.exists()
