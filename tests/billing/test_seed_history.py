"""The demo's seed gives its teams a past: finished jobs since the start of last month, with
their usage segments, so that last month's statements and this month's usage are not empty."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from billing.models import UsageSegment
from billing.segments import seconds_between
from jobs.models import Job, State
from tests.billing.conftest import FakeClock
from tests.conftest import api_as

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(clock: FakeClock) -> User:
    """The demo seeded on 3 November 2026, 09:00 UTC; its admin."""
    call_command("seed_demo", stdout=StringIO())
    return User.objects.get(username="admin")


def _get(user: User, path: str, **params: str) -> Any:
    response = api_as(user).get(path, params)
    assert response.status_code == 200, response.content
    return response.json()


def test_last_months_statements_are_not_empty(seeded: User) -> None:
    shown = {s["team"]: s for s in _get(seeded, "/api/v1/statements/", period="2026-10")}
    assert set(shown) == {"nlp", "research", "vision"}
    for slug in ("nlp", "vision"):
        assert shown[slug]["lines"] and Decimal(shown[slug]["figures"]["cost"]) > 0
    research = shown["research"]
    assert [line["team"] for line in research["lines"]] == ["nlp", "vision"]
    parts = Decimal(shown["nlp"]["figures"]["cost"]) + Decimal(shown["vision"]["figures"]["cost"])
    assert Decimal(research["figures"]["cost"]) == parts


def test_this_months_usage_so_far_is_not_empty(seeded: User, clock: FakeClock) -> None:
    body = _get(seeded, "/api/v1/usage/", period="2026-11", group_by="team")
    assert {row["team"] for row in body["rows"]} == {"nlp", "vision"}


def test_the_past_is_finished_jobs_each_with_its_run(seeded: User, clock: FakeClock) -> None:
    segments = list(UsageSegment.unscoped.select_related("job"))
    first = clock.now.replace(month=10, day=1, hour=0)
    assert segments and all(s.job.state in (State.SUCCEEDED, State.FAILED) for s in segments)
    for s in segments:
        assert s.ended_at is not None
        assert first <= s.started_at < s.ended_at <= clock.now - timedelta(hours=1)
        assert s.gpu_seconds == s.gpus * seconds_between(s.started_at, s.ended_at)
        assert s.job.submitted_at <= s.started_at and s.job.finished_at == s.ended_at
        assert s.job.total_gpus == s.gpus
    assert {s.started_at.month for s in segments} == {10, 11}
    # The jobs the seed submits for the demo to run are waiting, not part of the past.
    queued = Job.unscoped.filter(state=State.QUEUED).count()
    assert queued == 4 and Job.unscoped.count() == len(segments) + queued


def test_seeding_again_changes_nothing(seeded: User) -> None:
    before = UsageSegment.unscoped.count()
    call_command("seed_demo", stdout=StringIO())
    assert UsageSegment.unscoped.count() == before
