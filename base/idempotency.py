"""`Idempotency-Key`: a retried creating POST gets the first answer again and writes nothing.

A client whose connection broke cannot tell whether its submission was committed, so it sends
the same request again under the same key. The first answer is kept for 24 hours and replayed
to the same user for the same request (method, path and body); the same key on another request
is a 409. An answer of 400 or more wrote nothing, so it is not kept: a retry runs again.

The key is reserved by a unique row in the same transaction as the view's own writes. A
duplicate arriving while the first still runs waits on that row (PostgreSQL's unique index,
SQLite's single writer) and then replays the first answer, so the two never both write; a
process that dies before its commit leaves neither the key nor the write behind.

API clients send the header. A page's form carries the key as a hidden field made when the form
is rendered (`{% idempotency_field %}`), so a double click, or a resubmission after a dropped
connection, lands on what the first submission made.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import timedelta

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.views import APIView

from base.models import IdempotencyKey

HEADER = "Idempotency-Key"
FORM_FIELD = "idempotency_key"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
MAX_KEY_CHARS = 255
KEPT_FOR = timedelta(hours=24)


class IdempotencyMiddleware:
    """Runs a keyed POST once per user and key, and replays its answer to the repeats."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            given = _given_key(request)
        except RequestDataTooBig:  # its view refuses it as well, writing nothing
            given = None
        if given is None:
            return self.get_response(request)
        key, content = given
        api_view = _api_view(request)
        if not (0 < len(key) <= MAX_KEY_CHARS and key.isascii() and key.isprintable()):
            message = _("must be 1 to %(limit)d printable ASCII characters, got %(length)d") % {
                "limit": MAX_KEY_CHARS,
                "length": len(key),
            }
            return _refused(request, api_view, 400, message, field=HEADER)
        user = _user(request, api_view)
        if user is None:  # the view answers 401 or 403 itself, writing nothing
            return self.get_response(request)
        fingerprint = hashlib.sha256(f"POST {request.get_full_path()}\n".encode() + content)
        return self._once(request, api_view, user, key, fingerprint.hexdigest())

    def _once(
        self,
        request: HttpRequest,
        api_view: type[APIView] | None,
        user: User,
        key: str,
        fingerprint: str,
    ) -> HttpResponse:
        """Run the view with the key reserved in its transaction, or replay the key's answer."""
        now = timezone.now()
        # Expired keys go first, in their own short statement: deleted inside the transaction,
        # their row locks would hold every other keyed request until this view commits.
        IdempotencyKey.objects.filter(expires_at__lte=now).delete()
        with transaction.atomic():
            try:
                with transaction.atomic():
                    kept = IdempotencyKey.objects.create(
                        user=user, key=key, fingerprint=fingerprint, expires_at=now + KEPT_FOR
                    )
            except IntegrityError:
                kept = IdempotencyKey.objects.get(user=user, key=key)
                return _replay(request, api_view, kept, fingerprint)
            response = self.get_response(request)
            if response.status_code >= 400:
                transaction.set_rollback(True)  # the key too: a retry may succeed
                return response
            kept.status = response.status_code
            kept.content_type = response.get("Content-Type", "")
            kept.location = response.get("Location", "")
            kept.body = response.content
            kept.save(update_fields=["status", "content_type", "location", "body"])
        return response


def _given_key(request: HttpRequest) -> tuple[str, bytes] | None:
    """A POST's key and the content that must repeat with it: the header and the body, or a
    page form's hidden field and the form's fields (a browser draws a new multipart boundary
    for each submission, so the same form's bodies differ)."""
    if request.method != "POST":
        return None
    key = request.headers.get(HEADER)
    if key is not None:
        return key, request.body
    if request.content_type in FORM_TYPES and FORM_FIELD in request.POST:
        return request.POST[FORM_FIELD], request.POST.urlencode().encode()
    return None


def _api_view(request: HttpRequest) -> type[APIView] | None:
    """The REST framework view the request goes to; None for a page."""
    try:
        view = getattr(resolve(request.path_info).func, "cls", None)
    except Resolver404:
        return None
    return view if isinstance(view, type) and issubclass(view, APIView) else None


def _user(request: HttpRequest, api_view: type[APIView] | None) -> User | None:
    """Who asks: on a page the session's user; on the API whom the view's own authenticators
    find (an API token's owner), as the view will find them again."""
    user: User | AnonymousUser = request.user
    if api_view is not None:
        authenticators = [authenticator() for authenticator in api_view.authentication_classes]
        try:
            user = Request(request, authenticators=authenticators).user
        except APIException:  # a bad token, or no CSRF token with a session
            return None
    return user if isinstance(user, User) else None  # None: anonymous


def _replay(
    request: HttpRequest, api_view: type[APIView] | None, kept: IdempotencyKey, fingerprint: str
) -> HttpResponse:
    """The key's first answer, if this is the same request; else a 409."""
    if kept.fingerprint != fingerprint:
        if api_view is None:
            message = _("This form was already submitted with other values. Open it again.")
        else:
            message = _(
                "%(header)s %(key)s was used for another request in the last 24 hours; "
                "send a new key for a new request."
            ) % {"header": HEADER, "key": kept.key}
        return _refused(request, api_view, 409, message)
    answer = HttpResponse(bytes(kept.body), status=kept.status, content_type=kept.content_type)
    if kept.location:
        answer["Location"] = kept.location
    answer["Idempotent-Replayed"] = "true"
    return answer


def _refused(
    request: HttpRequest,
    api_view: type[APIView] | None,
    status: int,
    message: str,
    *,
    field: str | None = None,
) -> HttpResponse:
    """A refusal as the API writes errors (by field, or `detail`), or as a page."""
    if api_view is None:
        context = {"message": f"{field}: {message}" if field else message}
        return render(request, "base/refused.html", context, status=status)
    errors = {field: [message]} if field else {"detail": message}
    return JsonResponse(errors, status=status)
