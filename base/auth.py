"""`signed_in(request)`: the request's user as a `User`, for code behind an authentication gate;
`admin_required`: the gate of the platform admins' pages."""

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.translation import gettext as _
from rest_framework.request import Request

R = TypeVar("R", bound=HttpResponseBase)


def signed_in(request: HttpRequest | Request) -> User:
    user = request.user
    if not isinstance(user, User) or not user.is_authenticated:
        raise PermissionDenied(_("Sign in first."))
    return user


def admin_required(view: Callable[..., R]) -> Callable[..., R]:
    """Platform admins only: a signed-out visitor is sent to the portal's sign-in, a signed-in
    one who is no admin gets a 403 page saying what is missing (not the Django admin's login)."""

    @login_required
    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> R:
        if not request.user.is_staff:
            raise PermissionDenied(_("This page is for platform admins; your account is not one."))
        return view(request, *args, **kwargs)

    return guarded
