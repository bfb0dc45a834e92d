"""A token is read afresh by one statement on every request (tenants/tokens.py, base/rows.py):
it reads what the ORM reads, and a revocation, an expiry or a deactivation holds at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.forms.models import model_to_dict
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.actions import revoke_token
from tenants.models import ApiToken
from tenants.tokens import LAST_USED_RESOLUTION, authenticate_raw, issue_token
from tests.conftest import World

pytestmark = pytest.mark.django_db


class FakeClock:
    """`timezone.now()`: it stands still until the test moves it."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timezone, "now", fake)
    return fake


def _fields(instance: Any) -> dict[str, Any]:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def _me(raw: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client.get("/api/v1/me/").status_code


def test_it_reads_the_token_and_its_user_as_the_orm_does(
    world: World, django_assert_num_queries: Any
) -> None:
    issued, raw = issue_token(world.bob, "ci", expires_at=timezone.now() + timedelta(days=3))
    User.objects.filter(pk=world.bob.pk).update(last_login=timezone.now())
    ApiToken.objects.filter(pk=issued.pk).update(last_used_at=timezone.now())
    with django_assert_num_queries(1):  # last used just now: nothing written
        token = authenticate_raw(raw)
    assert token is not None
    expected = ApiToken.objects.select_related("user").get(pk=issued.pk)
    assert _fields(token) == _fields(expected)
    assert _fields(token.user) == _fields(expected.user)
    assert model_to_dict(token.user) == model_to_dict(expected.user)
    assert token.user.last_login is not None and timezone.is_aware(token.user.last_login)
    assert authenticate_raw(raw + "x") is None


def test_a_revoked_token_is_refused_at_once(world: World) -> None:
    token, raw = issue_token(world.bob, "ci")
    assert _me(raw) == 200
    revoke_token(token, acting_user=world.bob)
    assert _me(raw) == 401


def test_a_deactivated_users_token_is_refused_at_once(world: World) -> None:
    _token, raw = issue_token(world.bob, "ci")
    assert _me(raw) == 200
    User.objects.filter(pk=world.bob.pk).update(is_active=False)
    assert _me(raw) == 401


def test_a_token_is_refused_as_soon_as_its_expiry_passes(world: World, clock: FakeClock) -> None:
    _token, raw = issue_token(world.bob, "ci", expires_at=clock.now + timedelta(seconds=10))
    assert _me(raw) == 200
    clock.advance(9)
    assert _me(raw) == 200
    clock.advance(1)
    assert _me(raw) == 401


def test_last_use_is_written_once_a_minute_at_most(world: World, clock: FakeClock) -> None:
    token, raw = issue_token(world.bob, "ci")
    assert _me(raw) == 200
    first = clock.now
    clock.advance(LAST_USED_RESOLUTION.total_seconds())
    assert _me(raw) == 200
    token.refresh_from_db()
    assert token.last_used_at == first
    clock.advance(1)
    assert _me(raw) == 200
    token.refresh_from_db()
    assert token.last_used_at == clock.now
