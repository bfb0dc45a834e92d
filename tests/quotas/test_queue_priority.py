"""A queue's priority becomes a cluster-wide PriorityClass: it stays in the range the platform
sets (QUEUE_PRIORITY_MIN..MAX), for leads and admins alike."""

from __future__ import annotations

from typing import Any

import pytest

from quotas.models import Queue
from tests.conftest import World, api_as

pytestmark = pytest.mark.django_db


def _create(user: Any, priority: int) -> tuple[int, dict[str, Any]]:
    body = {"team": "vision", "name": "urgent", "priority": priority, "max_runtime": 3600}
    response = api_as(user).post("/api/v1/queues/", body, format="json")
    return response.status_code, response.json()


@pytest.mark.parametrize("who", ["alice", "admin"])
@pytest.mark.parametrize("priority", [2**31 - 1, 1001, -1001])
def test_a_queue_priority_outside_the_range_is_refused(
    world: World, who: str, priority: int
) -> None:
    status, body = _create(getattr(world, who), priority)
    assert (status, body) == (
        400,
        {"priority": [f"{priority} is outside the queue priorities -1000 to 1000"]},
    )
    assert not Queue.objects.for_team(world.vision).filter(name="urgent").exists()


def test_a_queue_cannot_be_moved_out_of_the_range(world: World) -> None:
    url = f"/api/v1/queues/{world.vision_normal.pk}/"
    response = api_as(world.alice).patch(url, {"priority": 10**9}, format="json")
    assert response.status_code == 400 and list(response.json()) == ["priority"]
    world.vision_normal.refresh_from_db()
    assert world.vision_normal.priority == 100


def test_the_range_is_the_admins_setting(world: World, settings: Any) -> None:
    settings.QUEUE_PRIORITY_MIN, settings.QUEUE_PRIORITY_MAX = 0, 5000
    assert _create(world.alice, 5000)[0] == 201
    assert _create(world.alice, -1)[1] == {
        "priority": ["-1 is outside the queue priorities 0 to 5000"]
    }
