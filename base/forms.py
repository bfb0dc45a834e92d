"""Helpers shared by the page views: turn a user-caused error into a flash message."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from base.errors import FieldErrors


def flash_errors(request: HttpRequest, exc: ValidationError | FieldErrors) -> None:
    if isinstance(exc, FieldErrors):
        items = list(exc.errors.items())
    elif hasattr(exc, "error_dict"):
        items = [(field, "; ".join(msgs)) for field, msgs in exc.message_dict.items()]
    else:
        items = [("error", "; ".join(exc.messages))]
    for field, message in items:
        messages.error(request, f"{field}: {message}")


def int_field(data: dict[str, str], name: str, *, low: int, high: int) -> int:
    """Read an integer form field or raise FieldErrors naming it and its range."""
    raw = data.get(name, "").strip()
    try:
        value = int(raw)
    except ValueError:
        raise FieldErrors({name: f"must be a whole number, got {raw[:20]!r}"}) from None
    if not low <= value <= high:
        raise FieldErrors({name: f"must be between {low} and {high}, got {value}"})
    return value
