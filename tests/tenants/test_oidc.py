"""Single sign-on against a small OpenID Connect provider run by the test on 127.0.0.1.

The provider serves the token, userinfo and JWKS endpoints over real HTTP and signs its ID
tokens with an RSA key made for the run; the browser's trip to its authorization page is the
test reading `state` and `nonce` off the redirect and handing a code back to the callback.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import User
from django.test import Client

from audit.models import AuditEvent
from base.roles import Role
from tenants.models import ClaimMapping, Membership, OidcIdentity
from tenants.oidc import delete_claim_mapping, save_claim_mapping
from tests.conftest import World

pytestmark = pytest.mark.django_db
CLIENT_ID = "gpu-portal"


@dataclass
class Provider:
    """What the provider knows: its key, and the sign-ins its authorization page granted."""

    base: str = ""
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    audience: str = CLIENT_ID
    grants: dict[str, dict[str, Any]] = field(default_factory=dict)  # code -> nonce, claims
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)  # access token -> claims

    def id_token(self, nonce: str, claims: dict[str, Any]) -> str:
        now = int(time.time())  # the token's own validity, checked by PyJWT against real time
        body = {"iss": self.base, "sub": claims["sub"], "aud": self.audience, "nonce": nonce}
        return jwt.encode(
            {**body, "iat": now, "exp": now + 300}, self.key, "RS256", headers={"kid": "k1"}
        )

    def jwks(self) -> dict[str, Any]:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _json(self, body: Any, status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/jwks":
                self._json(provider.jwks())
            elif self.path == "/userinfo":
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                claims = provider.tokens.get(token)
                self._json(claims or {"error": "invalid_token"}, 200 if claims else 401)
            else:
                self._json({"error": "not_found"}, 404)

        def do_POST(self) -> None:
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            grant = provider.grants.pop(form["code"][0], None)
            if self.path != "/token" or grant is None or form["client_id"] != [CLIENT_ID]:
                self._json({"error": "invalid_grant"}, 400)
                return
            access = secrets.token_urlsafe(16)
            provider.tokens[access] = grant["claims"]
            id_token = provider.id_token(grant["nonce"], grant["claims"])
            self._json({"access_token": access, "id_token": id_token, "token_type": "Bearer"})

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def provider(settings: Any) -> Iterator[Provider]:
    provider = Provider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(provider))
    provider.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = "client-secret"
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{provider.base}/authorize"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{provider.base}/token"
    settings.OIDC_OP_USER_ENDPOINT = f"{provider.base}/userinfo"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{provider.base}/jwks"
    settings.AUTHENTICATION_BACKENDS = [
        *settings.AUTHENTICATION_BACKENDS,
        "tenants.oidc.OrganisationBackend",
    ]
    yield provider
    server.shutdown()
    server.server_close()


def _sign_in(browser: Client, provider: Provider, claims: dict[str, Any]) -> Any:
    """The whole trip: portal → provider's authorization page → callback."""
    start = browser.get("/oidc/authenticate/", {"next": "/jobs/"})
    assert start.status_code == 302
    sent = urlsplit(start["Location"])
    assert f"{sent.scheme}://{sent.netloc}{sent.path}" == f"{provider.base}/authorize"
    query = parse_qs(sent.query)
    assert query["client_id"] == [CLIENT_ID] and query["code_challenge_method"] == ["S256"]
    code = secrets.token_urlsafe(8)
    provider.grants[code] = {"nonce": query["nonce"][0], "claims": claims}
    return browser.get("/oidc/callback/", {"code": code, "state": query["state"][0]})


def _map(world: World, value: str, team: Any, role: str = Role.MEMBER) -> ClaimMapping:
    mapping = ClaimMapping(value=value, team=team, role=role)
    return save_claim_mapping(mapping, acting_user=world.admin, before=None)


def _audited(world: World, action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.for_user(world.admin).filter(action=action).order_by("seq"))


def test_a_mapped_user_signs_in_and_joins_the_team(world: World, provider: Provider) -> None:
    _map(world, "ml-vision", world.vision)
    _map(world, "ml-vision-leads", world.vision, Role.LEAD)
    browser = Client()
    claims = {"sub": "u-123", "preferred_username": "dana", "groups": ["ml-vision-leads"]}

    answer = _sign_in(browser, provider, claims)

    assert answer.status_code == 302 and answer["Location"] == "/jobs/"
    dana = User.objects.get(oidc_identity__subject="u-123")
    assert dana.username == "dana" and not dana.has_usable_password()
    assert Membership.objects.for_team(world.vision).get(user=dana).role == Role.LEAD
    assert browser.get("/api/v1/me/").json()["username"] == "dana"
    assert [e.actor_name for e in _audited(world, "auth.login")] == ["dana"]


def test_each_sign_in_applies_the_mapping_again(world: World, provider: Provider) -> None:
    _map(world, "ml-vision", world.vision)
    claims = {"sub": "u-123", "preferred_username": "dana", "groups": ["ml-vision"]}
    _sign_in(Client(), provider, claims)
    _map(world, "ml-vision", world.nlp, Role.LEAD)

    _sign_in(Client(), provider, claims)

    dana = User.objects.get(username="dana")
    roles = {
        m.team.slug: m.role for m in Membership.objects.for_user(world.admin).filter(user=dana)
    }
    assert roles == {"vision": Role.MEMBER, "nlp": Role.LEAD}
    assert User.objects.filter(oidc_identity__isnull=False).count() == 1


def test_a_user_without_a_mapped_team_is_refused(world: World, provider: Provider) -> None:
    _map(world, "ml-vision", world.vision)
    browser = Client()
    claims = {"sub": "u-9", "preferred_username": "eve", "groups": ["marketing"]}

    answer = _sign_in(browser, provider, claims)

    assert answer.status_code == 302 and answer["Location"] == "/accounts/login/"
    assert not User.objects.filter(username="eve").exists()
    assert browser.get("/api/v1/me/").status_code in (401, 403)
    page = browser.get("/accounts/login/").content.decode()
    assert "belongs to no team here" in page
    (refusal,) = _audited(world, "auth.oidc_refused")
    assert refusal.actor_name == "eve"
    assert refusal.after == {"subject": "u-9", "values": ["marketing"]}


def test_a_local_account_of_the_same_name_is_not_taken_over(
    world: World, provider: Provider
) -> None:
    _map(world, "ml-vision", world.vision)
    claims = {"sub": "u-77", "preferred_username": "bob", "groups": ["ml-vision"]}
    browser = Client()

    _sign_in(browser, provider, claims)

    assert browser.get("/api/v1/me/").json()["username"] == "bob-u-77"
    assert not OidcIdentity.objects.filter(user=world.bob).exists()


def test_a_deactivated_account_stays_out(world: World, provider: Provider) -> None:
    _map(world, "ml-vision", world.vision)
    claims = {"sub": "u-5", "preferred_username": "finn", "groups": ["ml-vision"]}
    _sign_in(Client(), provider, claims)
    User.objects.filter(username="finn").update(is_active=False)
    browser = Client()

    answer = _sign_in(browser, provider, claims)

    assert answer["Location"] == "/accounts/login/"
    assert browser.get("/api/v1/me/").status_code in (401, 403)
    assert User.objects.filter(oidc_identity__isnull=False).count() == 1


def test_an_id_token_for_another_client_is_refused(world: World, provider: Provider) -> None:
    _map(world, "ml-vision", world.vision)
    provider.audience = "another-app"
    browser = Client()

    answer = _sign_in(browser, provider, {"sub": "u-1", "groups": ["ml-vision"]})

    assert answer["Location"] == "/accounts/login/"
    assert not User.objects.filter(oidc_identity__subject="u-1").exists()


def test_the_login_page_offers_the_organisation_only_when_configured(
    world: World, provider: Provider, settings: Any
) -> None:
    assert "/oidc/authenticate/" in Client().get("/accounts/login/").content.decode()
    settings.OIDC_ENABLED = False
    assert "/oidc/authenticate/" not in Client().get("/accounts/login/").content.decode()
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert Client().get("/oidc/callback/", {"code": "x", "state": "y"}).status_code == 404


def test_mapping_changes_are_audited(world: World) -> None:
    mapping = _map(world, "ml-vision", world.vision)
    before = {"value": "ml-vision", "team": "vision", "role": Role.MEMBER}
    mapping.role = Role.LEAD
    save_claim_mapping(mapping, acting_user=world.admin, before=before)
    delete_claim_mapping(mapping, acting_user=world.admin)

    saves = _audited(world, "oidc.mapping_save")
    after = {**before, "role": Role.LEAD}
    assert [(e.before, e.after) for e in saves] == [(None, before), (before, after)]
    (deleted,) = _audited(world, "oidc.mapping_delete")
    assert deleted.before == {"value": "ml-vision", "team": "vision", "role": "lead"}
    assert not ClaimMapping.unscoped.exists()
