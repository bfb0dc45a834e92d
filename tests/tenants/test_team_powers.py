"""What a team's leads may change and what only platform admins may: the fair-share weight and
the image allow-list are the admins', within bounds; everything else of the team its leads'."""

from __future__ import annotations

from typing import Any

import pytest

from audit.models import AuditEvent
from tenants.models import Team
from tests.conftest import World, api_as

pytestmark = pytest.mark.django_db

URL = "/api/v1/teams/vision/"


def _patch(user: Any, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = api_as(user).patch(URL, body, format="json")
    return response.status_code, response.json()


def _admin_fields(team: Team) -> tuple[float, str]:
    team.refresh_from_db()
    return team.fair_share_weight, team.image_allowlist


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("fair_share_weight", 1e16),
        ("fair_share_weight", -1.0),
        ("fair_share_weight", 2.0),
        ("image_allowlist", ""),
        ("image_allowlist", "registry.example/vision/\ndocker.io/"),
    ],
)
def test_a_lead_cannot_change_what_admins_own(world: World, field: str, value: object) -> None:
    Team.objects.filter(pk=world.vision.pk).update(image_allowlist="registry.example/vision/")
    audited = AuditEvent.objects.for_user(world.admin).count()
    status, body = _patch(world.alice, {field: value})
    assert (status, body) == (403, {"detail": f"{field} is set by platform admins only."})
    assert _admin_fields(world.vision) == (1.0, "registry.example/vision/")
    assert AuditEvent.objects.for_user(world.admin).count() == audited


def test_a_lead_still_changes_the_rest_of_the_team(world: World) -> None:
    Team.objects.filter(pk=world.vision.pk).update(
        fair_share_weight=3.0, image_allowlist="registry.example/vision/"
    )
    status, body = _patch(world.alice, {"name": "Vision Lab", "fair_share_weight": 3.0})
    assert status == 200 and body["name"] == "Vision Lab"
    assert _admin_fields(world.vision) == (3.0, "registry.example/vision/")


def test_an_admin_sets_the_weight_and_the_allow_list(world: World) -> None:
    body = {"fair_share_weight": 1000, "image_allowlist": "nvcr.io/nvidia"}
    assert _patch(world.admin, body)[0] == 200
    assert _admin_fields(world.vision) == (1000.0, "nvcr.io/nvidia")


@pytest.mark.parametrize("weight", [0, -1.0, 1000.5, 1e16, 1e308])
def test_an_admins_weight_must_be_positive_and_bounded(world: World, weight: float) -> None:
    status, body = _patch(world.admin, {"fair_share_weight": weight})
    assert (status, body) == (
        400,
        {"fair_share_weight": ["must be a number above 0 and at most 1000"]},
    )
    assert _admin_fields(world.vision) == (1.0, "")
