"""Helpers shared by the page views: turn a user-caused error into a flash message."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils.translation import gettext as _

from base.errors import FieldErrors


def flash_errors(request: HttpRequest, exc: ValidationError | FieldErrors) -> None:
    if isinstance(exc, FieldErrors):
        items = list(exc.errors.items())
    elif hasattr(exc, "error_dict"):
        items = [(field, "; ".join(msgs)) for field, msgs in exc.message_dict.items()]
    else:
        items = [("error", "; ".join(exc.messages))]
    for field, message in items:
        messages.error(request, _("%(field)s: %(message)s") % {"field": field, "message": message})


def int_field(data: dict[str, str], name: str, *, low: int, high: int) -> int:
    """Read an integer form field or raise FieldErrors naming it and its range."""
    raw = data.get(name, "").strip()
    try:
        value = int(raw)
    except ValueError:
        message = _("must be a whole number, got %(value)r")
        raise FieldErrors({name: message % {"value": raw[:20]}}) from None
    if not low <= value <= high:
        message = _("must be between %(low)d and %(high)d, got %(value)d")
        raise FieldErrors({name: message % {"low": low, "high": high, "value": value}})
    return value
