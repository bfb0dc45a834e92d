"""Logins are state-changing actions too: each one leaves an audit event."""

from typing import Any

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from tenants.actions import record_login


@receiver(user_logged_in)
def audit_login(sender: object, request: object, user: Any, **kwargs: Any) -> None:
    record_login(user)
