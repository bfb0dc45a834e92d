"""Teams, members and API tokens."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from tenants.models import ApiToken, Membership
from tenants.scoping import ScopeError
from tests.conftest import PASSWORD, World, api_as

if TYPE_CHECKING:
    from rest_framework.response import _MonkeyPatchedResponse

pytestmark = pytest.mark.django_db


def test_tenant_manager_fails_closed_without_a_scope(world: World) -> None:
    with pytest.raises(ScopeError, match=r"Membership.objects needs a scope"):
        list(Membership.objects.all())
    with pytest.raises(ScopeError):
        Membership.objects.filter(role="lead")


def test_members_see_their_team_and_leads_their_sub_teams(world: World) -> None:
    from tenants.models import Role

    assert [t["slug"] for t in api_as(world.bob).get("/api/v1/teams/").json()["results"]] == [
        "vision"
    ]
    Membership.objects.create(team=world.research, user=world.carol, role=Role.LEAD)
    slugs = [t["slug"] for t in api_as(world.carol).get("/api/v1/teams/").json()["results"]]
    assert slugs == ["nlp", "research", "vision"]


def test_only_admins_create_teams(world: World) -> None:
    body = {"slug": "audio", "name": "Audio", "parent": "research"}
    assert api_as(world.alice).post("/api/v1/teams/", body, format="json").status_code == 403
    response = api_as(world.admin).post("/api/v1/teams/", body, format="json")
    assert response.status_code == 201
    assert response.json()["namespace"] == "gpu-audio"
    bad = api_as(world.admin).post(
        "/api/v1/teams/", {"slug": "Bad Slug", "name": "x"}, format="json"
    )
    assert bad.status_code == 400 and "slug" in bad.json()


def test_lead_adds_and_removes_members(world: World) -> None:
    url = "/api/v1/teams/vision/members/"
    assert api_as(world.bob).post(url, {"username": "carol"}, format="json").status_code == 403
    added = api_as(world.alice).post(url, {"username": "carol", "max_gpus": 8}, format="json")
    assert added.status_code == 201 and added.json() == {
        "username": "carol",
        "role": "member",
        "max_gpus": 8,
        "created_at": added.json()["created_at"],
    }
    again = api_as(world.alice).post(url, {"username": "carol"}, format="json")
    assert again.json() == {"username": ["carol is already in vision"]}
    assert api_as(world.alice).delete(f"{url}carol/").status_code == 204
    assert not Membership.objects.for_team(world.vision).filter(user=world.carol).exists()


def test_token_exchange_shows_the_token_once_and_stores_only_its_hash(world: World) -> None:
    response = APIClient().post(
        "/api/v1/auth/token/",
        {"username": "bob", "password": PASSWORD, "name": "cli"},
        format="json",
    )
    assert response.status_code == 201
    raw = response.json()["token"]
    stored = ApiToken.objects.get(user=world.bob)
    assert raw.startswith("gpt_") and raw not in stored.key_hash
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    me = client.get("/api/v1/me/")
    assert me.json()["username"] == "bob"
    stored.refresh_from_db()
    assert stored.last_used_at is not None


def test_wrong_password_gets_no_token(world: World) -> None:
    response = APIClient().post(
        "/api/v1/auth/token/", {"username": "bob", "password": "nope"}, format="json"
    )
    assert response.status_code == 401
    assert not ApiToken.objects.exists()


def test_a_revoked_token_is_refused(world: World) -> None:
    page = Client()
    page.force_login(world.bob)
    created = page.post("/profile/", {"name": "laptop"})
    token = ApiToken.objects.get(user=world.bob)
    raw = created.context["new_token"]
    assert raw.split("_")[1] == token.prefix
    page.post(f"/profile/tokens/{token.prefix}/revoke/")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/me/").status_code == 401


def test_me_lists_my_teams_and_roles(world: World) -> None:
    assert api_as(world.alice).get("/api/v1/me/").json() == {
        "username": "alice",
        "email": "alice@example.org",
        "is_admin": False,
        "teams": [{"slug": "vision", "name": "Vision", "role": "lead"}],
    }


def _exchange(**extra: object) -> _MonkeyPatchedResponse:
    body = {"username": "bob", "password": PASSWORD, "name": "cli", **extra}
    return APIClient().post("/api/v1/auth/token/", body, format="json")


def test_a_token_may_be_given_an_expiry_and_answers_401_once_it_has_passed(world: World) -> None:
    response = _exchange(expires_in_days=30)
    assert response.status_code == 201
    token = ApiToken.objects.get(user=world.bob)
    assert token.expires_at is not None
    lifetime = token.expires_at - token.created_at
    assert abs(lifetime - timedelta(days=30)) < timedelta(minutes=1)
    assert parse_datetime(response.json()["expires_at"]) == token.expires_at
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {response.json()['token']}")
    assert client.get("/api/v1/me/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = client.get("/api/v1/me/")
    assert expired.status_code == 401
    assert f"API token {token.prefix} expired at" in expired.json()["detail"]


def test_a_token_without_expiry_keeps_working(world: World) -> None:
    response = _exchange()
    assert response.status_code == 201 and response.json()["expires_at"] is None
    assert ApiToken.objects.get(user=world.bob).expires_at is None


@pytest.mark.parametrize("days", [0, 366, -1])
def test_a_token_expiry_outside_one_to_365_days_is_refused(world: World, days: int) -> None:
    response = _exchange(expires_in_days=days)
    assert response.status_code == 400
    assert list(response.json()) == ["expires_in_days"]
    assert str(365 if days > 365 else 1) in response.json()["expires_in_days"][0]
    assert not ApiToken.objects.exists()
