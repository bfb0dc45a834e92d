"""`{% idempotency_field %}`: the hidden key that makes a form's submission happen once."""

from __future__ import annotations

import uuid

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from base.idempotency import FORM_FIELD

register = template.Library()


@register.simple_tag
def idempotency_field() -> SafeString:
    """A new key each time the form is rendered: that rendering, submitted twice, acts once."""
    return format_html('<input type="hidden" name="{}" value="{}">', FORM_FIELD, uuid.uuid4().hex)
