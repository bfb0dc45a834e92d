"""A team always keeps at least one lead: demoting or removing the last one is refused with a
400 naming the field, through the API and the team page alike; nothing changes."""

from __future__ import annotations

import pytest
from django.test import Client

from tenants.models import Membership, Role
from tests.conftest import World, api_as

pytestmark = pytest.mark.django_db


def _role(world: World, username: str) -> str | None:
    found = Membership.objects.for_team(world.vision).filter(user__username=username).first()
    return found.role if found else None


def test_api_refuses_to_demote_the_last_lead(world: World) -> None:
    response = api_as(world.alice).patch(
        "/api/v1/teams/vision/members/alice/", {"role": "member"}, format="json"
    )
    assert response.status_code == 400
    assert "last lead of team vision" in response.json()["role"][0]
    assert _role(world, "alice") == Role.LEAD


def test_api_refuses_to_remove_the_last_lead(world: World) -> None:
    response = api_as(world.admin).delete("/api/v1/teams/vision/members/alice/")
    assert response.status_code == 400
    assert "last lead" in response.json()["username"][0]
    assert _role(world, "alice") == Role.LEAD


def test_page_refuses_to_demote_or_remove_the_last_lead(world: World) -> None:
    client = Client()
    client.force_login(world.alice)
    demoted = client.post("/teams/vision/members/alice/", {"role": "member"}, follow=True)
    removed = client.post("/teams/vision/members/alice/", {"remove": "1"}, follow=True)
    for response in (demoted, removed):
        assert "last lead of team vision" in response.content.decode()
    assert _role(world, "alice") == Role.LEAD


def test_a_lead_may_step_down_once_another_leads(world: World) -> None:
    lead = api_as(world.alice)
    promoted = lead.patch("/api/v1/teams/vision/members/bob/", {"role": "lead"}, format="json")
    assert promoted.status_code == 200
    stepped_down = lead.patch(
        "/api/v1/teams/vision/members/alice/", {"role": "member"}, format="json"
    )
    assert stepped_down.status_code == 200
    assert (_role(world, "alice"), _role(world, "bob")) == (Role.MEMBER, Role.LEAD)
    refused = api_as(world.bob).delete("/api/v1/teams/vision/members/bob/")
    assert refused.status_code == 400 and _role(world, "bob") == Role.LEAD
