"""Streamed responses that stay streamed under ASGI.

Given a plain iterator, Django's ASGI handler reads it whole into memory before sending a
byte (with a warning), which turns "download the whole log" or an audit export into one
allocation of its full size. Under ASGI the iterator is read here a batch at a time on
Django's sync thread (it may query the database), and the batches are sent as they come.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from itertools import islice
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

BATCH = 256
"""Pieces read per trip to the sync thread."""


async def _batched(pieces: Iterator[str]) -> AsyncIterator[str]:
    take = sync_to_async(lambda: list(islice(pieces, BATCH)), thread_sensitive=True)
    while batch := await take():
        for piece in batch:
            yield piece


def streamed(
    request: HttpRequest | Any, pieces: Iterator[str], **kwargs: Any
) -> StreamingHttpResponse:
    """A response of `pieces`, streamed however the request came in (a DRF request too)."""
    django_request = getattr(request, "_request", request)
    body = _batched(pieces) if isinstance(django_request, ASGIRequest) else pieces
    return StreamingHttpResponse(body, **kwargs)
