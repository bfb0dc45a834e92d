"""OpenAPI documents: kubesim serves none, so kubectl falls back to its compiled-in schemas."""

from __future__ import annotations

from typing import Any

from kubesim.errors import ApiError


def document(path: str) -> dict[str, Any]:
    raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
