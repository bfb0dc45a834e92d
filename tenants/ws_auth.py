"""Personal API tokens on websockets: `gpuctl logs -f` follows a job with its token.

A websocket whose handshake carries `Authorization: Bearer <token>` (or `Token <token>`) is that
token's user, resolved as the REST API resolves it (`tenants.tokens.authenticate_raw`); an
unknown, revoked or expired token makes it anonymous, which every consumer refuses (4401).
Without the header the session's user stands, as before. Browsers never send this header on
their own, so it opens no cross-site path the session cookie does not already guard.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.contrib.auth.models import AnonymousUser
from rest_framework.exceptions import AuthenticationFailed

from tenants.tokens import authenticate_raw


def _token_user(raw: str) -> Any:
    try:
        token = authenticate_raw(raw)
    except AuthenticationFailed:  # expired: refused like an unknown token
        token = None
    return token.user if token is not None else AnonymousUser()


class TokenWebsocketAuth(BaseMiddleware):
    """Inside `AuthMiddlewareStack`: a token in the handshake overrides the session's user."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        header = dict(scope.get("headers", [])).get(b"authorization", b"").decode("latin1")
        keyword, _space, raw = header.partition(" ")
        if keyword in ("Bearer", "Token") and raw.strip():
            user = await database_sync_to_async(_token_user)(raw.strip())
            scope = dict(scope, user=user)
        return await super().__call__(scope, receive, send)
