"""Logins, failed logins and logouts are audited: each one leaves an audit event.

Django sends these signals from the login form, the admin and the API's token endpoint alike,
so listening here covers every way in.
"""

from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db import transaction
from django.dispatch import receiver
from django.http import HttpRequest

from audit.record import record
from tenants.actions import record_login

USERNAME_MAX_LENGTH = User._meta.get_field("username").max_length or 150


@receiver(user_logged_in)
def audit_login(sender: object, request: object, user: Any, **kwargs: Any) -> None:
    record_login(user)


@receiver(user_logged_out)
def audit_logout(sender: object, request: object, user: User | None, **kwargs: Any) -> None:
    if user is None:  # logging out without a session changes nothing
        return
    with transaction.atomic():
        record("auth.logout", actor=user, team=None, target=user)


@receiver(user_login_failed)
def audit_login_failure(
    sender: object, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    """The actor is the username tried (an unsaved user: no id is claimed), never the password:
    Django has masked it in `credentials` already, and it is not read here anyway."""
    attempted = User(username=str(credentials.get("username", ""))[:USERNAME_MAX_LENGTH])
    with transaction.atomic():
        record(
            "auth.login_failed",
            actor=attempted,
            team=None,
            after={"path": request.path} if request is not None else None,
        )
