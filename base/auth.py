"""`signed_in(request)`: the request's user as a `User`, for code behind an authentication gate."""

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.utils.translation import gettext as _
from rest_framework.request import Request


def signed_in(request: HttpRequest | Request) -> User:
    user = request.user
    if not isinstance(user, User) or not user.is_authenticated:
        raise PermissionDenied(_("Sign in first."))
    return user
