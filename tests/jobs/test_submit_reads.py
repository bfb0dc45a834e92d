"""What a submission through the API reads and answers: the team a spec without one goes to,
the job shown as `JobSerializer` shows it, and the queries it takes."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from jobs.api import team_for_submission
from jobs.limits import sole_team
from jobs.models import Job
from jobs.serializers import JobSerializer, shown_job
from jobs.spec import SpecError
from tenants.models import Membership, Team
from tenants.tokens import issue_token
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db


def _fields(team: Team) -> dict[str, Any]:
    return {f.attname: getattr(team, f.attname) for f in Team._meta.concrete_fields}


def test_a_spec_without_a_team_goes_to_the_submitters_only_team(world: World) -> None:
    team = sole_team(world.bob)
    assert team is not None
    assert _fields(team) == _fields(Team.objects.get(pk=world.vision.pk))
    assert team_for_submission(world.bob, None) == world.vision
    response = api_as(world.bob).post("/api/v1/jobs/", spec(team=None), format="json")
    assert response.status_code == 201 and response.json()["team"] == "vision"


def test_a_spec_without_a_team_is_refused_to_none_or_several_teams(world: World) -> None:
    Membership.objects.create(team=world.nlp, user=world.bob)
    assert sole_team(world.bob) is None and sole_team(world.admin) is None
    for user in (world.bob, world.admin):
        with pytest.raises(SpecError) as refused:
            team_for_submission(user, None)
        assert list(refused.value.errors) == ["team"]
    response = api_as(world.bob).post("/api/v1/jobs/", spec(team=None), format="json")
    assert response.status_code == 400 and list(response.json()) == ["team"]
    assert not Job.objects.for_team(world.vision).exists()


def test_a_job_is_shown_as_its_serializer_shows_it(world: World) -> None:
    response = api_as(world.bob).post("/api/v1/jobs/", spec(env={"TOKEN": "x"}), format="json")
    job = Job.objects.for_team(world.vision).get(pk=response.json()["id"])
    assert shown_job(job) == JobSerializer(job).data
    assert response.json()["env"] == {"TOKEN": "********"}
    clone = api_as(world.bob).post(f"/api/v1/jobs/{job.pk}/clone/", {}, format="json")
    copied = Job.objects.for_team(world.vision).get(pk=clone.json()["id"])
    assert clone.json() == JobSerializer(copied).data | {"env": clone.json()["env"]}


def test_a_token_submission_takes_the_fewest_queries(
    world: World, client: Any, django_assert_num_queries: Any
) -> None:
    _token, raw = issue_token(world.bob, "ci")
    headers = {"Authorization": f"Bearer {raw}"}
    body = spec(team=None)
    assert (
        client.post("/api/v1/jobs/", body, "application/json", headers=headers).status_code == 201
    )
    # Three reads: the token and its user, the team, the limits. The writes in the test's
    # savepoint: the job, its event and the audit event with the chain's head, in two
    # statements on PostgreSQL, five on SQLite (jobs/submission.py).
    writes = 2 if connection.vendor == "postgresql" else 5
    with django_assert_num_queries(3 + 1 + writes + 1):
        response = client.post("/api/v1/jobs/", body, "application/json", headers=headers)
    assert response.status_code == 201, response.json()
