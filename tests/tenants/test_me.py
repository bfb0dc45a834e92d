"""`/api/v1/me/` answers what `MeSerializer`, its schema, would show, in one query."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from tenants.me import me
from tenants.models import Membership, Role
from tenants.serializers import MeSerializer
from tenants.tokens import issue_token
from tests.conftest import World

pytestmark = pytest.mark.django_db


def test_it_shows_what_the_serializer_shows(world: World) -> None:
    Membership.objects.create(team=world.nlp, user=world.alice, role=Role.MEMBER)
    for user in (world.alice, world.bob, world.admin):
        assert me(user) == MeSerializer(user).data
    assert [team["slug"] for team in me(world.alice)["teams"]] == ["nlp", "vision"]
    assert me(world.admin)["is_admin"] is True and me(world.admin)["teams"] == []


def test_me_with_a_token_takes_two_queries(
    world: World, client: Any, django_assert_num_queries: Any
) -> None:
    _token, raw = issue_token(world.bob, "ci")
    headers = {"Authorization": f"Bearer {raw}"}
    assert client.get("/api/v1/me/", headers=headers).status_code == 200  # last use written
    with django_assert_num_queries(2):  # the token and its user; the teams
        response = client.get("/api/v1/me/", headers=headers)
    bob = User.objects.get(pk=world.bob.pk)
    assert response.json() == MeSerializer(bob).data
