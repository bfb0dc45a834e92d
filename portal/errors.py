"""Error pages in the portal's style: what went wrong in words, never a traceback.

Wired in portal/urls.py as handler400/403/404/500. A 500 page is rendered without the request's
context processors: whatever broke the request (the database, say) must not break its page.
"""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.template import loader

from base.middleware import current_request_context


def _message(exception: Exception | None) -> str:
    """The reason an exception carries for the user (access helpers word theirs for people);
    Django's own internals (a resolver's tried patterns) carry no string and show nothing."""
    if exception is None or not exception.args or not isinstance(exception.args[0], str):
        return ""
    return exception.args[0]


def _page(
    request: HttpRequest, template: str, exception: Exception | None, status: int
) -> HttpResponse:
    try:
        return render(request, template, {"exception": _message(exception)}, status=status)
    finally:
        # Under ASGI Django renders an error page in a thread of its own (the exception
        # handler's sync_to_async is not thread-sensitive): a database connection the page's
        # header opened there goes back to PostgreSQL's pool now, or nothing ever returns it.
        if not connection.in_atomic_block:
            connection.close()


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _page(request, "400.html", exception, 400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _page(request, "403.html", exception, 403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _page(request, "404.html", exception, 404)


def server_error(request: HttpRequest) -> HttpResponse:
    context = current_request_context()
    page = loader.get_template("500.html").render(
        {"request_id": context.request_id if context else ""}
    )
    return HttpResponseServerError(page)
