"""The API schema's shared parts, added once here rather than on every view: the errors any
operation may answer, and the `Idempotency-Key` header of every signed-in POST."""

from __future__ import annotations

from typing import Any

from base.idempotency import HEADER, MAX_KEY_CHARS

ERROR = {
    "type": "object",
    "description": "`detail` about the request as a whole, or `{field: [message]}` per field.",
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": {},
}

COMMON_ERRORS = {
    "400": "Invalid input: each field named, with its limit.",
    "401": "Not signed in, or the API token is invalid or revoked.",
    "403": "Signed in, but not allowed to do this.",
    "404": "No such object, or none you may see.",
    "413": "The request body is too large.",
    "429": "Too many requests: retry later.",
}
CONFLICT = {"409": f"{HEADER} already used for another request, or the object's state forbids it."}

IDEMPOTENCY_HEADER = {
    "in": "header",
    "name": HEADER,
    "required": False,
    "schema": {"type": "string", "pattern": f"^[ -~]{{1,{MAX_KEY_CHARS}}}$"},
    "description": (
        "Makes a retry safe: the same key and body from the same user within 24 hours get the "
        "first answer again (with `Idempotent-Replayed: true`) and write nothing; the same key "
        "with another body is a 409. Only successful answers are kept."
    ),
}


def _signed_in(operation: dict[str, Any]) -> bool:
    """Whether the operation takes a user: keys are kept per user, so anonymous POSTs have none."""
    return any(requirement for requirement in operation.get("security", [{}]))


def add_shared_answers(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the shared error answers and the idempotency header."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    for operations in result["paths"].values():
        for method, operation in operations.items():
            answers = COMMON_ERRORS
            if method == "post" and _signed_in(operation):
                operation.setdefault("parameters", []).append(IDEMPOTENCY_HEADER)
                answers = COMMON_ERRORS | CONFLICT
            for status, description in answers.items():
                operation["responses"].setdefault(status, {"description": description, **error})
    return result
