"""The API's JSON parser, in a module of its own: REST framework imports it as it loads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers

from base.errors import FieldErrors
from base.untrusted import field_problems, too_deep


class JSONParser(parsers.JSONParser):
    """JSON bodies, refused with a 400 naming the field where nested beyond `MAX_DEPTH` or
    holding text no database column can store (NUL, a lone surrogate)."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:  # the decoder's own guard, far deeper than MAX_DEPTH
            raise FieldErrors({"body": too_deep()}) from None
        if problems := field_problems(data, whole="body"):
            raise FieldErrors(problems)
        return data
