"""Personal API tokens: `gpt_<prefix>_<secret>`, stored as SHA-256, sent as `Bearer` tokens.

The token has 256 bits of randomness, so a plain SHA-256 (not a slow password hash) is the right
store: it cannot be brute-forced and it keeps authentication to one indexed lookup.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from base.rows import Columns, column, table
from tenants.models import ApiToken

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# Writing last_used_at on every request would turn every read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)
# The longest lifetime a token may be given when it is created with an expiry.
MAX_TOKEN_DAYS = 365


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def issue_token(
    user: User, name: str, *, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token; the raw value is returned once and never stored."""
    prefix = secrets.token_hex(4)
    raw = f"{settings.API_TOKEN_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(
        user=user, name=name, prefix=prefix, key_hash=hash_token(raw), expires_at=expires_at
    )
    return token, raw


_TOKEN = Columns(ApiToken, "token")
_USER = Columns(get_user_model(), "person")


@cache
def _live_token() -> str:
    """The unrevoked token with a hash, and its user: every request's first read, so one
    statement rather than a query compiled again each time (base/rows.py)."""
    user_id = column(_USER.model, "pk", _USER.alias)
    return f"""
SELECT {_TOKEN.select()}, {_USER.select()}
FROM {table(ApiToken)} {_TOKEN.alias}
JOIN {table(_USER.model)} {_USER.alias} ON {user_id} = {column(ApiToken, "user", _TOKEN.alias)}
WHERE {column(ApiToken, "key_hash", _TOKEN.alias)} = %s
  AND {column(ApiToken, "revoked_at", _TOKEN.alias)} IS NULL
"""


def _read_live_token(key_hash: str) -> ApiToken | None:
    with connection.cursor() as cursor:
        cursor.execute(_live_token(), [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(_TOKEN.fields)
    token = _TOKEN.instance(row[:split])
    token.user = _USER.instance(row[split:])
    return token


def authenticate_raw(raw: str) -> ApiToken | None:
    """The live token with this value; None if there is none, AuthenticationFailed if expired.
    Read afresh on every request: a revocation, a new expiry or a deactivated user holds at
    once, in every process."""
    token = _read_live_token(hash_token(raw))
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.expires_at is not None and token.expires_at <= now:
        raise exceptions.AuthenticationFailed(
            _("API token %(prefix)s expired at %(at)s: create a new one.")
            % {"prefix": token.prefix, "at": token.expires_at.isoformat(timespec="seconds")}
        )
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


class TokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        keyword, _space, raw = header.partition(" ")
        if keyword not in (self.keyword, "Token"):
            return None
        token = authenticate_raw(raw.strip())
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid or revoked API token."))
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class TokenRateThrottle(SimpleRateThrottle):
    """Limits each API token; session clients are limited by the web server in front."""

    scope = "token"

    def get_cache_key(self, request: Request, view: object) -> str | None:
        if not isinstance(request.auth, ApiToken):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.prefix}
