"""The address a request came from, trusting proxies only as configured.

Behind TRUSTED_PROXY_COUNT reverse proxies that each append to X-Forwarded-For, the client is the
address the outermost of them saw: the count-th entry from the right. Entries further left were
written by the client and prove nothing; with no proxies declared the header is ignored, since
any client can send it. DRF's throttles read the header the same way, from the same setting
(NUM_PROXIES, which is TRUSTED_PROXY_COUNT), so the API's limits, the login lockout, the audit
trail and the logs agree on who asked, over HTTP (`client_ip`) and over ASGI scopes alike
(`scope_client_ip`: the agents' endpoint, websockets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_ipv46_address
from django.http import HttpRequest
from rest_framework.settings import api_settings


def forwarded_client(peer: str | None, forwarded_for: str | None) -> str | None:
    """The client's address, given the connection's peer and the X-Forwarded-For it sent."""
    proxies = api_settings.NUM_PROXIES or 0  # TRUSTED_PROXY_COUNT, as DRF's throttles read it
    if proxies <= 0 or not forwarded_for:
        return peer
    entries = [entry.strip() for entry in forwarded_for.split(",")]
    given = entries[-min(proxies, len(entries))]
    try:
        validate_ipv46_address(given)
    except ValidationError:
        return peer  # a proxy that wrote garbage is not believed
    return given


def client_ip(request: HttpRequest) -> str | None:
    return forwarded_client(request.META.get("REMOTE_ADDR"), request.headers.get("X-Forwarded-For"))


def scope_client_ip(scope: Mapping[str, Any]) -> str | None:
    """`client_ip` of an ASGI connection (its headers are byte pairs, lower-case names)."""
    client = scope.get("client")
    headers: Iterable[tuple[bytes, bytes]] = scope.get("headers", [])
    values = [value.decode("latin-1") for name, value in headers if name == b"x-forwarded-for"]
    return forwarded_client(client[0] if client else None, ",".join(values) or None)
