"""Each person's language, remembered across sessions and browsers.

Django's LocaleMiddleware picks the language of a request from the language cookie, else the
browser's Accept-Language. `UserLanguageMiddleware` runs after authentication: for a signed-in
person without the cookie (a new browser, a fresh session) it activates the language they chose
in the portal, so their pages follow them. The cookie still wins: it is this browser's latest
choice, and the switcher that sets it also stores the choice (`tenants.views.language_set`).
The stored choice is read once, at login (`store_language_at_login`, a `user_logged_in`
receiver), and kept in the session.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest, HttpResponse
from django.utils import translation

from tenants.models import UserPreference

SESSION_KEY = "tenants.language"
"""The signed-in user's stored language ("" for none), read from the database at login."""


def supported(language: str) -> str:
    """The portal's code for `language` (e.g. "zh-hans" for "zh-Hans"), or "" if not offered."""
    try:
        return translation.get_supported_language_variant(language) if language else ""
    except LookupError:
        return ""


def remember_language(user: User, language: str, session: SessionBase) -> None:
    """Store `language` as the user's choice, for this session and every later one."""
    UserPreference.objects.update_or_create(user=user, defaults={"language": language})
    session[SESSION_KEY] = language


def _chosen(user_id: int) -> str:
    chosen = UserPreference.objects.filter(user_id=user_id).values_list("language", flat=True)
    return chosen.first() or ""


def store_language_at_login(
    sender: object, request: HttpRequest | None, user: User, **_: object
) -> None:
    """`user_logged_in` receiver: the new session starts with the user's language, so pages
    need no query for it."""
    if request is not None and hasattr(request, "session"):
        request.session[SESSION_KEY] = _chosen(user.pk)


def stored_language(request: HttpRequest) -> str:
    """The signed-in user's chosen language, or "" (anonymous, or no choice stored)."""
    if not request.user.is_authenticated:
        return ""
    if SESSION_KEY not in request.session:  # a session opened before the login receiver ran
        request.session[SESSION_KEY] = _chosen(request.user.pk)
    language = request.session[SESSION_KEY]
    return supported(language) if isinstance(language, str) else ""


class UserLanguageMiddleware:
    """After AuthenticationMiddleware: a signed-in user's stored language, unless the browser
    holds a language cookie."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        cookie = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME, "")
        if not supported(cookie) and (language := stored_language(request)):
            translation.activate(language)
            request.LANGUAGE_CODE = translation.get_language()
        return self.get_response(request)
