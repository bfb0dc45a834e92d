"""`fields_of()`: the before/after picture of a model instance for an audit event."""

from typing import Any

from django.db import models


def fields_of(instance: models.Model | None, *names: str) -> dict[str, Any] | None:
    if instance is None:
        return None
    return {name: getattr(instance, name) for name in names}
