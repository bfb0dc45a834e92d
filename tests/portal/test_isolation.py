"""Walk every URL pattern and websocket route as an outsider and as an anonymous user.

Each route is listed in ROUTES with what it is. A route added without an entry fails
`test_every_route_is_classified`, so nothing new goes out unchecked.

- object: names one of team vision's objects; the outsider (carol, of team nlp) gets 404.
- listing: lists what the caller may see; the outsider gets 200 and nothing of vision's.
- admin, admin-api: platform admins only; the outsider is turned away (403).
- public: the login page, the token exchange, the API schema and its docs page, the language
  switch, the scripts' translations, the probes /healthz and /readyz, the organisation's
  sign-in and its callback (no tenant data).
- own: a POST on the signed-in user's own rows only (marking their notifications read).
- submit: takes a job spec naming a team (POST only); the outsider naming vision gets 404.
- scrape: Prometheus' /metrics, for the holder of METRICS_TOKEN only (no session opens it).

The agents' endpoint (`/api/v1/agent/samples/`) is no Django route: portal.asgi sends it to
monitoring/endpoint.py, which takes node tokens only (a signed-in user gets 401, tests/monitoring).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from jobs.actions import submit_job
from jobs.spec import parse_spec
from jobs.sweeps import parse_sweep, submit_sweep
from portal.asgi import application
from portal.routing import websocket_urlpatterns
from tenants.tokens import issue_token
from tests.conftest import World, spec

MARKER = "secret-vision-job"

ROUTES: dict[str, str] = {
    # pages
    "dashboard": "listing",
    "job-list": "listing",
    "job-new": "listing",
    "job-detail": "object",
    "job-cancel": "object",
    "job-clone": "object",
    "job-cancel-many": "listing",
    "sweep-detail": "object",
    "sweep-cancel": "object",
    "sweep-clone": "object",
    "team-detail": "object",
    "member-add": "object",
    "member-change": "object",
    "queue-save": "object",
    "queue-delete": "object",
    "subteam-quota": "object",
    "profile": "listing",
    "token-revoke": "object",
    "audit-list": "listing",
    "notification-list": "listing",
    "notifications-read": "own",
    "alert-list": "listing",
    "alert-acknowledge": "admin",
    "alert-rules": "admin",
    "alert-silences": "admin",
    "incident-list": "admin",
    "incident-export": "admin",
    "incident-detail": "admin",
    "inspection-list": "admin",
    "inspection-run": "admin",
    "inspection-detail": "admin",
    "usage": "listing",
    "statements": "listing",
    "statements-export": "listing",
    "usage-api": "listing",
    "efficiency": "listing",
    "idle-policy-save": "object",
    "efficiency-api": "listing",
    "prices-api": "listing",
    "statements-api": "listing",
    "queue-multiplier-api": "admin-api",
    "adjustments-api": "admin-api",
    "budgets-api": "listing",
    "budget-api": "object",
    "audit-export": "listing",
    "audit-verify": "admin",
    "manage-scheduling": "admin",
    "whatif-list": "listing",
    "whatif-detail": "object",
    "manage-teams": "admin",
    "manage-gpu-types": "admin",
    "manage-quotas": "admin",
    "manage-nodes": "admin",
    "manage-node-cordon": "admin",
    "node-list": "admin-api",
    "node-detail": "admin-api",
    "node-cordon": "admin-api",
    "node-uncordon": "admin-api",
    "cluster": "admin",
    "login": "public",
    "logout": "public",
    "set_language": "public",
    "language-set": "public",
    "oidc_authentication_init": "public",
    "oidc_authentication_callback": "public",
    "javascript-catalog": "public",
    "metrics": "scrape",
    "healthz": "public",
    "readyz": "public",
    # API
    "api-root": "listing",
    "team-list": "listing",
    "team-detail-api": "object",
    "team-members": "object",
    "team-member": "object",
    "gpu-type-list": "listing",
    "gpu-type-detail": "global",
    "quota-list": "listing",
    "quota-detail": "object",
    "queue-list": "listing",
    "queue-detail": "object",
    "job-list-api": "listing",
    "job-detail-api": "object",
    "job-cancel-api": "object",
    "job-clone-api": "object",
    "sweep-list-api": "listing",
    "sweep-detail-api": "object",
    "sweep-cancel-api": "object",
    "sweep-clone-api": "object",
    "job-dry-run": "submit",
    "audit-list-api": "listing",
    "audit-export-api": "listing",
    "me": "listing",
    "job-logs": "object",
    "job-metrics": "object",
    "team-live": "object",
    "alerts-api": "listing",
    "alert-acknowledge-api": "admin-api",
    "incidents-api": "admin-api",
    "incident-detail-api": "admin-api",
    "auth-token": "public",
    "schema": "public",
    "api-docs": "public",
}
WEBSOCKETS = {
    "ws/jobs/<int:job_id>/": "object",
    "ws/teams/<slug:team_slug>/": "object",
    "ws/cluster/": "admin",
}


def _walk(patterns: list[Any], prefix: str = "") -> list[tuple[str, str, list[str]]]:
    found = []
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith("admin/"):
                continue  # the Django admin has its own staff-only gate
            found += _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            route = prefix + str(entry.pattern)
            name = entry.name or ""
            if route.startswith("api/v1/") and f"{name}-api" in ROUTES:
                name = f"{name}-api"
            found.append((route, name, list(entry.pattern.converters)))
    return found


def routes() -> list[tuple[str, str, list[str]]]:
    return _walk(get_resolver().url_patterns)


def test_every_route_is_classified() -> None:
    unclassified = [(route, name) for route, name, _ in routes() if name not in ROUTES]
    assert unclassified == []
    assert {str(p.pattern) for p in websocket_urlpatterns} == set(WEBSOCKETS)


@pytest.fixture
def vision_objects(world: World) -> dict[str, str]:
    job = submit_job(world.vision, parse_spec(spec(name=MARKER)), acting_user=world.bob)
    from quotas.models import Quota

    quota = Quota.objects.for_team(world.vision).get(gpu_type=world.h100)
    _, raw = issue_token(world.bob, "bob-laptop")
    sweep = submit_sweep(
        world.vision, *parse_sweep({**spec(), "sweep": {"array": 2}}), acting_user=world.bob
    )
    from cluster.models import WhatIf

    now = timezone.now()
    whatif = WhatIf.objects.create(
        requested_by=world.alice, requested_at=now, window_start=now, window_end=now, policy="fair"
    )
    return {
        "sweep_id": str(sweep.pk),
        "whatif_id": str(whatif.pk),
        "alert_id": "1",  # admin routes: turned away before any lookup
        "incident_id": "1",
        "run_id": "1",
        "job_id": str(job.pk),
        "slug": "vision",
        "team_slug": "vision",
        "username": "bob",
        "queue_id": str(world.vision_normal.pk),
        "prefix": raw.split("_")[1],
        "name": "h100-80g",
        "pk": "",  # filled per route below
        "quota": str(quota.pk),
        "queue": str(world.vision_normal.pk),
        "job": str(job.pk),
    }


def _url(route: str, objects: dict[str, str]) -> str:
    """Fill a route's converters with team vision's objects."""
    import re

    def fill(match: re.Match[str]) -> str:
        key = match.group(2)
        if key == "pk":
            kind = route.split("/")[2]  # api/v1/<kind>/<pk>/
            return objects[{"quotas": "quota", "queues": "queue", "jobs": "job"}[kind]]
        return objects[key]

    url = re.sub(r"<(?:(\w+):)?(\w+)>", fill, route)
    url = re.sub(
        r"\(\?P<(\w+)>[^)]*\)", lambda m: objects["pk" if m.group(1) == "pk" else m.group(1)], url
    )
    return "/" + url.lstrip("^").rstrip("$")


def _regex_route(route: str) -> str:
    # The DRF router writes regexes: ^jobs/(?P<pk>[^/.]+)/cancel/$
    import re

    return re.sub(r"\(\?P<(\w+)>[^)]*\)", r"<\1>", route).replace("^", "").replace("$", "")


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post", "patch", "delete"])
def test_outsider_gets_404_for_every_object_route(
    world: World, vision_objects: dict[str, str], method: str
) -> None:
    outsider = Client()
    outsider.force_login(world.carol)
    checked = 0
    for route, name, _ in routes():
        if ROUTES[name] != "object":
            continue
        url = _url(_regex_route(route), vision_objects)
        response = getattr(outsider, method)(url, content_type="application/json")
        if response.status_code == 405:
            continue  # this route has no such method for anyone
        assert response.status_code == 404, (method, url, response.status_code)
        checked += 1
    assert checked >= 5


@pytest.mark.django_db
def test_outsider_sees_nothing_of_another_team_in_listings(
    world: World, vision_objects: dict[str, str]
) -> None:
    outsider = Client()
    outsider.force_login(world.carol)
    for route, name, _ in routes():
        if ROUTES[name] != "listing":
            continue
        url = _url(_regex_route(route), vision_objects)
        response = outsider.get(url)
        assert response.status_code == 200, (url, response.status_code)
        streamed = getattr(response, "streaming_content", None)
        body = b"".join(streamed) if streamed is not None else response.content
        assert MARKER.encode() not in body, url
        assert b"vision" not in body.lower(), url


@pytest.mark.django_db
def test_member_sees_the_team_in_listings(world: World, vision_objects: dict[str, str]) -> None:
    # The same walk as a teammate must find the marker: the outsider test above is not vacuous.
    owner, lead = Client(), Client()
    owner.force_login(world.bob)
    lead.force_login(world.alice)
    for client, url in (
        (owner, "/"),
        (owner, "/jobs/"),
        (owner, "/api/v1/jobs/"),
        (lead, "/audit/"),
        (lead, "/api/v1/audit/"),
    ):
        assert MARKER.encode() in client.get(url).content, url


@pytest.mark.django_db
def test_outsider_cannot_submit_for_another_team(
    world: World, vision_objects: dict[str, str]
) -> None:
    outsider = Client()
    outsider.force_login(world.carol)
    checked = 0
    for route, name, _ in routes():
        if ROUTES[name] != "submit":
            continue
        url = _url(_regex_route(route), vision_objects)
        response = outsider.post(url, spec(team="vision"), content_type="application/json")
        assert response.status_code == 404, (url, response.status_code)
        assert MARKER.encode() not in response.content and b"h100" not in response.content
        checked += 1
    assert checked == 1


@pytest.mark.django_db
def test_outsider_is_turned_away_from_admin_pages(world: World) -> None:
    outsider = Client()
    outsider.force_login(world.carol)
    for route, name, _ in routes():
        if ROUTES[name] not in ("admin", "admin-api"):
            continue
        url = _url(
            _regex_route(route),
            {"name": "h100-a-0", "alert_id": "1", "incident_id": "1", "run_id": "1"},
        )
        if ROUTES[name] == "admin":
            response = outsider.get(url)
            # The portal's 403 page says what is missing (no detour to the Django admin's login).
            assert response.status_code == 403, (url, response.status_code)
            assert b"platform admins" in response.content, url
        elif ROUTES[name] == "admin-api":
            assert outsider.get(url).status_code == 403, url
            assert outsider.post(url).status_code in (403, 405), url


@pytest.mark.django_db
def test_anonymous_is_refused_everywhere_but_public_routes(
    world: World, vision_objects: dict[str, str]
) -> None:
    anonymous = Client()
    for route, name, _ in routes():
        if ROUTES[name] in ("public", "scrape"):
            continue
        url = _url(_regex_route(route), vision_objects)
        response = anonymous.get(url)
        if url.startswith("/api/"):
            assert response.status_code == 401, (url, response.status_code)
        else:
            assert response.status_code == 302 and "login" in response["Location"], url


@pytest.mark.django_db
def test_scrape_routes_open_to_the_token_only(world: World, settings: Any) -> None:
    settings.METRICS_TOKEN = "scrape-token-0123456789"
    scraped = [name for _, name, _ in routes() if ROUTES[name] == "scrape"]
    assert scraped == ["metrics"]
    admin = Client()
    admin.force_login(world.admin)
    for client in (Client(), admin):
        assert client.get("/metrics").status_code == 401
    authorised = Client().get(
        "/metrics", headers={"Authorization": f"Bearer {settings.METRICS_TOKEN}"}
    )
    assert authorised.status_code == 200


async def _connect(path: str, user: Any) -> tuple[bool, int | None]:
    from channels.db import database_sync_to_async
    from django.contrib.auth.models import AnonymousUser

    communicator = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://testserver")]
    )
    if user is not None:
        client = await database_sync_to_async(_logged_in)(user)
        communicator.scope["headers"].append(
            (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
        )
    else:
        communicator.scope["user"] = AnonymousUser()
    connected, code = await communicator.connect()
    await communicator.disconnect()
    return connected, code


def _logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db(transaction=True)
async def test_websockets_refuse_outsiders_and_anonymous(world: World) -> None:
    from channels.db import database_sync_to_async

    job = await database_sync_to_async(submit_job)(
        world.vision, parse_spec(spec(name=MARKER)), acting_user=world.bob
    )
    paths = {
        "ws/jobs/<int:job_id>/": f"/ws/jobs/{job.pk}/",
        "ws/teams/<slug:team_slug>/": "/ws/teams/vision/",
        "ws/cluster/": "/ws/cluster/",
    }
    assert set(paths) == set(WEBSOCKETS)
    for route, path in paths.items():
        assert (await _connect(path, world.carol))[0] is False, path
        assert (await _connect(path, None))[0] is False, path
        assert (await _connect(path, world.bob))[0] is (WEBSOCKETS[route] == "object"), path
        assert (await _connect(path, world.admin))[0] is True, path


async def _connect_with_token(path: str, raw: str) -> bool:
    communicator = WebsocketCommunicator(
        application,
        path,
        headers=[(b"origin", b"http://testserver"), (b"authorization", f"Bearer {raw}".encode())],
    )
    connected, _code = await communicator.connect()
    await communicator.disconnect()
    return connected


@pytest.mark.django_db(transaction=True)
async def test_websockets_with_a_token_see_what_its_user_sees(world: World) -> None:
    from channels.db import database_sync_to_async

    job = await database_sync_to_async(submit_job)(
        world.vision, parse_spec(spec(name=MARKER)), acting_user=world.bob
    )
    tokens = {
        user.username: (await database_sync_to_async(issue_token)(user, "ws"))[1]
        for user in (world.bob, world.carol, world.admin)
    }
    expired = (
        await database_sync_to_async(issue_token)(
            world.bob, "old", expires_at=timezone.now() - timedelta(seconds=1)
        )
    )[1]
    paths = {
        "ws/jobs/<int:job_id>/": f"/ws/jobs/{job.pk}/",
        "ws/teams/<slug:team_slug>/": "/ws/teams/vision/",
        "ws/cluster/": "/ws/cluster/",
    }
    for route, path in paths.items():
        assert await _connect_with_token(path, tokens["carol"]) is False, path
        assert await _connect_with_token(path, "gpp_nope_nope") is False, path
        assert await _connect_with_token(path, expired) is False, path
        assert await _connect_with_token(path, tokens["bob"]) is (WEBSOCKETS[route] == "object")
        assert await _connect_with_token(path, tokens["admin"]) is True, path
