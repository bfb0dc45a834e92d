"""The language of a websocket's subscriber, chosen as for their pages (tenants/language.py).

A page's language is the browser's language cookie, else the signed-in user's stored choice,
else the browser's Accept-Language, else the portal's default. A websocket's handshake carries
the same cookie, session and header, so what it streams reads like the page that opened it; a
token's socket (gpuctl) has no cookie or session of its own and gets its user's stored choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest
from django.utils import translation

from tenants.language import stored_language, supported


def _handshake(scope: Mapping[str, Any]) -> HttpRequest:
    """The handshake as a request, with what the language middleware reads of one."""
    request = HttpRequest()
    request.COOKIES = dict(scope.get("cookies") or {})
    headers = dict(scope.get("headers") or [])
    request.META["HTTP_ACCEPT_LANGUAGE"] = headers.get(b"accept-language", b"").decode("latin1")
    request.user = scope["user"]
    # The session's store may be a lazy object over the database: read here, in a thread.
    session = scope.get("session")
    request.session = SessionBase() if session is None else session
    return request


def subscriber_language(scope: Mapping[str, Any]) -> str:
    """The language code for the signed-in user of this websocket scope. Reads the session or
    the database: call it in a thread (`database_sync_to_async`)."""
    request = _handshake(scope)
    cookie = supported(request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME, ""))
    return cookie or stored_language(request) or translation.get_language_from_request(request)
