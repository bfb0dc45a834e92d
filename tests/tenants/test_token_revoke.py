"""`DELETE /api/v1/auth/token/` revokes the token it is sent with (`gpuctl logout`)."""

from __future__ import annotations

import pytest
from django.db.models import QuerySet
from django.test import Client
from rest_framework.test import APIClient

from audit.models import AuditEvent
from tenants.models import ApiToken
from tenants.tokens import issue_token
from tests.conftest import PASSWORD, World

pytestmark = pytest.mark.django_db
URL = "/api/v1/auth/token/"


def _revocations(world: World) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.for_user(world.admin).filter(action="token.revoke")


def _bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_it_revokes_the_token_in_use_and_audits_it(world: World) -> None:
    exchanged = APIClient().post(
        URL, {"username": "bob", "password": PASSWORD, "name": "laptop"}, format="json"
    )
    raw = exchanged.json()["token"]
    _other, other_raw = issue_token(world.bob, "ci")
    client = _bearer(raw)
    assert client.get("/api/v1/me/").status_code == 200

    assert client.delete(URL).status_code == 204

    assert client.get("/api/v1/me/").status_code == 401
    assert _bearer(other_raw).get("/api/v1/me/").status_code == 200  # only the one in use
    token = ApiToken.objects.get(prefix=exchanged.json()["prefix"])
    assert token.revoked_at is not None
    event = _revocations(world).get()
    assert (event.actor_name, event.target_id) == ("bob", str(token.pk))


def test_a_revoked_token_cannot_revoke_again(world: World) -> None:
    _token, raw = issue_token(world.bob, "laptop")
    assert _bearer(raw).delete(URL).status_code == 204
    assert _bearer(raw).delete(URL).status_code == 401
    assert _revocations(world).count() == 1


def test_without_a_token_nothing_is_revoked(world: World) -> None:
    issue_token(world.bob, "laptop")
    session = Client()
    session.force_login(world.bob)
    assert APIClient().delete(URL).status_code == 401
    assert session.delete(URL).status_code == 401  # a session has no token to revoke
    assert not ApiToken.objects.filter(revoked_at__isnull=False).exists()
    assert not _revocations(world).exists()


def test_the_password_exchange_still_answers_without_credentials(world: World) -> None:
    body = {"username": "bob", "password": "wrong-password", "name": "laptop"}
    assert APIClient().post(URL, body, format="json").status_code == 401
    body["password"] = PASSWORD
    assert APIClient().post(URL, body, format="json").status_code == 201
