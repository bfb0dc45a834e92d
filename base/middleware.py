"""Per-request context (a request id, echoed in X-Request-ID and logs, and the client address),
and the refusal of requests no view could handle.

Actions read the context through `current_request_context()` so the audit trail records who
asked from where without every call site passing the request down. Log records carry the
request id, the user and the team the URL names (`log_fields`, portal/logs.py).
"""

import itertools
import os
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _

from base.client_ip import client_ip
from base.untrusted import text_problem


@dataclass(frozen=True)
class RequestContext:
    request_id: str
    ip: str | None


_context: ContextVar[RequestContext | None] = ContextVar("request_context", default=None)
_request: ContextVar[HttpRequest | None] = ContextVar("request", default=None)
# Django logs a request's 4xx and 5xx answers after the middleware returned: those records name
# their request, whose context is found here.
_contexts: WeakKeyDictionary[HttpRequest, RequestContext] = WeakKeyDictionary()


def current_request_context() -> RequestContext | None:
    return _context.get()


class _Ids:
    """New request ids: 32 hex digits, a random prefix per process and a counter. Cheaper than
    a uuid4 per request, whose read of the system's randomness lets go of the GIL: on a busy
    web process, waiting to get it back cost about 50 µs a request."""

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self.prefix, self.count = uuid.uuid4().hex[:12], itertools.count()

    def next(self) -> str:
        return f"{self.prefix}{next(self.count):020x}"


_ids = _Ids()


def request_id(given: str) -> str:
    """The client's X-Request-ID if it is a sane one, else a new id."""
    if given and len(given) <= 64 and given.replace("-", "").isalnum():
        return given
    return _ids.next()


@contextmanager
def request_context(context: RequestContext) -> Iterator[None]:
    """Make `context` the current request's while the block runs."""
    token = _context.set(context)
    try:
        yield
    finally:
        _context.reset(token)


class RequestContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.headers.get("X-Request-ID", "")
        context = RequestContext(request_id(given), client_ip(request))
        _contexts[request] = context
        token = _request.set(request)
        try:
            with request_context(context):
                response = self.get_response(request)
        finally:
            _request.reset(token)
        response["X-Request-ID"] = context.request_id
        return response

    def process_view(self, request: HttpRequest, *args: object) -> None:
        # The session's user is loaded here, before the view, so that a log record written
        # later (perhaps in a transaction that already failed) never has to query for it.
        user = getattr(request, "user", None)
        if user is not None:
            user.is_authenticated  # noqa: B018  (evaluates the lazy user)


def log_fields(
    logger: object, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: the request's id, user and team (from the URL) on a record.

    The request is the record's own (Django's records name it) or the one being served. An API
    token's user is the request's user once DRF authenticated it, so it is read at log time.
    """
    request = event.pop("request", None)
    if not isinstance(request, HttpRequest):
        request = _request.get()
    context = (_contexts.get(request) if request is not None else None) or _context.get()
    if context is not None:
        event.setdefault("request_id", context.request_id)
    if request is None:
        return event
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        event.setdefault("user", user.get_username())
    match = request.resolver_match
    if match is not None and "team_slug" in match.kwargs:
        event.setdefault("team", match.kwargs["team_slug"])
    return event


def _refusal(request: HttpRequest, status: int, field: str, message: str) -> HttpResponse:
    """The API's field-error JSON for API paths, a plain page for the rest."""
    if request.path.startswith("/api/"):
        return JsonResponse({field: [message]}, status=status)
    text = f"{field}: {message}\n"
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


def body_too_big(length: int | None) -> str:
    """Why a body over DATA_UPLOAD_MAX_MEMORY_SIZE is refused, with its length where declared."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if length is None:
        return _("is over the limit of %(limit)d bytes") % {"limit": limit}
    return _("is %(length)d bytes, the limit is %(limit)d bytes") % {
        "length": length,
        "limit": limit,
    }


def _oversized(request: HttpRequest) -> HttpResponse | None:
    """A body declared larger than Django will read (it would raise RequestDataTooBig later)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None  # Django reads such a body as empty
    if limit is None or length <= limit:
        return None
    return _refusal(request, 413, "body", body_too_big(length))


def _unstorable(request: HttpRequest) -> HttpResponse | None:
    """A path or query parameter holding text no database column can store."""
    if problem := text_problem(request.path):
        return _refusal(request, 400, "path", problem)
    for key, values in request.GET.lists():
        if problem := text_problem(key):
            return _refusal(request, 400, "query", problem)
        for value in values:
            if problem := text_problem(value):
                return _refusal(request, 400, key, problem)
    return None


class RefuseUnreadableMiddleware:
    """Refuse, before any view runs, a body over DATA_UPLOAD_MAX_MEMORY_SIZE (413) and a path or
    query string holding NUL or a lone surrogate (400): views then never meet either."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return _oversized(request) or _unstorable(request) or self.get_response(request)
