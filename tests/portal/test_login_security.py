"""Password guessing: lockout on the form and the token endpoint, proxies trusted only as
configured, and every failed login, login and logout in the audit trail."""

from __future__ import annotations

from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import F
from django.test import Client
from rest_framework.test import APIClient
from rest_framework.throttling import AnonRateThrottle

from audit.models import AuditEvent
from tenants.models import ApiToken
from tests.conftest import PASSWORD, World

pytestmark = pytest.mark.django_db

TOKEN_URL = "/api/v1/auth/token/"


def _token_attempt(username: str, password: str, forwarded_for: str) -> int:
    body = {"username": username, "password": password}
    response = APIClient().post(TOKEN_URL, body, format="json", HTTP_X_FORWARDED_FOR=forwarded_for)
    return response.status_code


def _events(world: World, action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.for_user(world.admin).filter(action=action).order_by("seq"))


def test_rotating_x_forwarded_for_does_not_escape_the_token_endpoints_throttle(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "2/min"})
    # Other usernames each time, so only the address-based throttle can stop the third.
    statuses = [_token_attempt(f"ghost{i}", "guess", f"203.0.113.{i}") for i in range(3)]
    assert statuses == [401, 401, 429]


def test_rotating_x_forwarded_for_does_not_escape_the_lockout(world: World) -> None:
    limit = settings.AXES_FAILURE_LIMIT
    statuses = [_token_attempt("bob", "guess", f"203.0.113.{i}") for i in range(limit)]
    assert statuses == [401] * (limit - 1) + [429]
    response = APIClient().post(TOKEN_URL, {"username": "bob", "password": PASSWORD}, format="json")
    assert response.status_code == 429
    assert "Too many failed logins" in response.json()["detail"]
    assert response["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    assert not ApiToken.objects.exists()


def test_wrong_passwords_on_the_login_form_lock_the_account_out_from_that_address(
    world: World,
) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        wrong = client.post("/accounts/login/", {"username": "bob", "password": "guess"})
        assert wrong.status_code == 200 and b"Wrong username or password" in wrong.content
    locked = client.post("/accounts/login/", {"username": "bob", "password": "guess"})
    assert locked.status_code == 429 and b"Too many failed logins" in locked.content
    right = client.post("/accounts/login/", {"username": "bob", "password": PASSWORD})
    assert right.status_code == 429
    assert client.get("/").status_code == 302  # still not signed in
    # Another user from the same address, and bob from another, are not locked out.
    assert (
        Client().post("/accounts/login/", {"username": "carol", "password": PASSWORD})["Location"]
        == "/"
    )
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    assert (
        elsewhere.post("/accounts/login/", {"username": "bob", "password": PASSWORD})["Location"]
        == "/"
    )


def test_the_lockout_ends_after_the_cool_off(world: World) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/accounts/login/", {"username": "bob", "password": "guess"})
    # As if the cool-off had passed since the last failure.
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - settings.AXES_COOLOFF_TIME)
    right = client.post("/accounts/login/", {"username": "bob", "password": PASSWORD})
    assert right.status_code == 302 and right["Location"] == "/"


def test_failed_logins_are_audited_with_the_name_tried_and_never_the_password(
    world: World,
) -> None:
    Client().post("/accounts/login/", {"username": "bob", "password": "form-guess"})
    _token_attempt("nobody", "api-guess", "203.0.113.9")
    failures = _events(world, "auth.login_failed")
    assert [(e.actor_name, e.actor_id, e.team_id, e.ip) for e in failures] == [
        ("bob", None, None, "127.0.0.1"),
        ("nobody", None, None, "127.0.0.1"),  # X-Forwarded-For is not trusted by default
    ]
    assert [e.after for e in failures] == [{"path": "/accounts/login/"}, {"path": TOKEN_URL}]
    stored = repr([(e.before, e.after, e.target_id) for e in failures])
    assert "guess" not in stored


def test_the_audit_takes_the_address_a_trusted_proxy_saw(world: World, settings: Any) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    _token_attempt("nobody", "guess", "10.0.0.1, 203.0.113.9")
    assert _events(world, "auth.login_failed")[0].ip == "203.0.113.9"


def test_logging_in_and_out_is_audited(world: World) -> None:
    client = Client()
    client.post("/accounts/login/", {"username": "bob", "password": PASSWORD})
    client.post("/accounts/logout/")
    login, logout = _events(world, "auth.login"), _events(world, "auth.logout")
    assert [(e.actor_name, e.ip) for e in login + logout] == [
        ("bob", "127.0.0.1"),
        ("bob", "127.0.0.1"),
    ]
    assert logout[0].seq > login[0].seq
