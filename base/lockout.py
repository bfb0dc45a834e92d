"""The answer to a login refused for too many wrong passwords (django-axes' lockout callable).

The API gets JSON with a `detail`, the login page is shown again with the message; both answer
429 with Retry-After, so clients and people alike learn when to try again.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _


def lockout_message() -> str:
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return _(
        "Too many failed logins for this account from your address: "
        "try again in %(minutes)d minutes."
    ) % {"minutes": minutes}


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: Any
) -> HttpResponse:
    status = 429
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": lockout_message()}, status=status)
    else:
        context = {"lockout": lockout_message(), "next": request.POST.get("next", "")}
        response = render(request, "registration/login.html", context, status=status)
    response["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response
