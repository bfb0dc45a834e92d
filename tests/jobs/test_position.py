"""Where a waiting job stands: its place in the whole queue and in its team's, in the API and on
its page; an estimate that has passed never reads as a time in the past; a job with more nodes
than its GPU type has is refused at submission."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import Node
from jobs.models import Job
from scheduler import Policy, schedule
from tests.conftest import World, api_as, spec
from tests.scheduler.builders import config, job, node, quota, snapshot

pytestmark = pytest.mark.django_db


def _waiting(world: World, queue_position: int, team_position: int, **fields: object) -> Job:
    response = api_as(world.bob).post("/api/v1/jobs/", spec(), format="json")
    waiting = Job.objects.for_team(world.vision).get(pk=response.json()["id"])
    figures = {"jobs_ahead": 3, "queue_position": queue_position, "team_position": team_position}
    Job.unscoped.filter(pk=waiting.pk).update(
        pending_code="PRIORITY", pending_message="3 jobs ahead", pending_figures=figures, **fields
    )
    return waiting


def test_the_api_gives_a_waiting_jobs_place_in_the_queue_and_in_its_team(world: World) -> None:
    waiting = _waiting(world, 7, 2)
    body = api_as(world.bob).get(f"/api/v1/jobs/{waiting.pk}/").json()
    assert body["position"] == {"queue": 7, "team": 2}


def test_the_job_page_shows_the_place_in_the_queue(world: World) -> None:
    waiting = _waiting(world, 7, 2)
    page = Client()
    page.force_login(world.bob)
    html = page.get(f"/jobs/{waiting.pk}/").content.decode()
    assert 'id="job-position"' in html
    assert "Position 7 in the whole queue, 2 in the team" in html


def test_an_estimate_that_has_passed_reads_from_now_and_says_so(world: World) -> None:
    past = timezone.now() - timedelta(minutes=5)
    waiting = _waiting(world, 1, 1, estimated_start=past, estimated_start_latest=past)
    estimate = api_as(world.bob).get(f"/api/v1/jobs/{waiting.pk}/").json()["estimated_start"]
    assert estimate["passed"] is True
    assert estimate["earliest"] >= (past + timedelta(minutes=4)).isoformat()[:16]
    page = Client()
    page.force_login(world.bob)
    html = page.get(f"/jobs/{waiting.pk}/").content.decode()
    assert "was expected to start by" in html


def test_a_job_with_more_nodes_than_its_gpu_type_has_is_refused(world: World) -> None:
    for name in ("h100-a", "h100-b"):
        Node.objects.create(name=name, gpu_type=world.h100, gpu_capacity=8, gpu_allocatable=8)
    before = Job.unscoped.count()
    response = api_as(world.bob).post(
        "/api/v1/jobs/", spec(nodes=3, gpus_per_node=8), format="json"
    )
    assert response.status_code == 400
    assert response.json()["nodes"] == ["3 requested, the cluster has 2 nodes of type h100-80g"]
    assert Job.unscoped.count() == before


def test_the_scheduler_numbers_waiting_jobs_in_policy_order() -> None:
    queued = [
        job(1, "alice-lab", gpus=8, submit=0.0),
        job(2, "bob-lab", gpus=8, submit=1.0),
        job(3, "alice-lab", gpus=8, submit=2.0),
    ]
    quotas = [quota("alice-lab", 8, 16), quota("bob-lab", 8, 16)]
    decisions = schedule(snapshot(queued, [], [node("n1", 0)], quotas), config(policy=Policy.FIFO))
    places = {i: (p.position, p.team_position) for i, p in decisions.pending.items()}
    assert places == {1: (1, 1), 2: (2, 1), 3: (3, 2)}
