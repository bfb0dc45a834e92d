"""REST framework settings hooks: pagination and JSON errors (kept apart to avoid import cycles)."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from base.errors import FieldErrors
from base.middleware import body_too_big, current_request_context

log = logging.getLogger(__name__)


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500


def _field_errors(exc: DjangoValidationError | FieldErrors) -> dict[str, list[str]]:
    if isinstance(exc, FieldErrors):
        return {field: [message] for field, message in exc.errors.items()}
    if hasattr(exc, "error_dict"):
        return {field: list(messages) for field, messages in exc.message_dict.items()}
    return {"non_field_errors": list(exc.messages)}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Field errors as `{field: [message]}`; internal errors logged, never shown."""
    if isinstance(exc, DjangoValidationError | FieldErrors):
        return Response(_field_errors(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, PermissionDenied):
        return Response({"detail": str(exc)}, status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, RequestDataTooBig):  # sent without a length (the middleware refused those)
        return Response(
            {"body": [body_too_big(None)]}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
        )
    response = drf_exception_handler(exc, context)
    if response is not None:
        return response
    request_context = current_request_context()
    request_id = request_context.request_id if request_context else ""
    log.exception("internal error in API view")
    return Response(
        {"detail": "Internal error.", "request_id": request_id},
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )
