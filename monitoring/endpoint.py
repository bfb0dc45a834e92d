"""The agents' endpoint, `POST /api/v1/agent/samples/` with a node token (Bearer), as a plain
ASGI application in front of Django (portal.asgi).

Every node posts every few seconds, so the endpoint skips what Django would spend on each post
and nothing here needs: the middleware chain (sessions, CSRF, messages: each a hop to a
thread and back), URL resolution and the request object. It reads and checks the body on the
event loop and hands it to `intake`, which stores posts in groups.

The token is checked before the body is read: an unknown token costs one lookup, never the
reading or parsing of a body, and a known one may send no more than a batch can hold.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from base.client_ip import scope_client_ip
from base.middleware import RequestContext, request_context, request_id
from monitoring import intake
from monitoring.intake import Received, Reply
from monitoring.tokens import token_hash
from monitoring.validation import MAX_BODY_BYTES, validate_batch

log = logging.getLogger(__name__)

PATH = "/api/v1/agent/samples/"
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

NO_TOKEN = Reply(401, {"detail": "A node token is required (Authorization: Bearer <token>)."})
TOO_LARGE = Reply(
    413,
    {"detail": f"At most {MAX_BODY_BYTES} bytes per post: what the largest valid batch takes."},
)
TOO_DEEP = Reply(400, {"non_field_errors": ["the body is JSON nested too deeply to be a batch"]})


async def agent_samples(scope: Scope, receive: Receive, send: Send) -> None:
    headers = dict(scope["headers"])
    given = headers.get(b"x-request-id", b"").decode("latin-1")
    context = RequestContext(request_id(given), scope_client_ip(scope))
    with request_context(context):
        try:
            await _serve(scope["method"], headers, receive, send, context.request_id)
        except Exception:
            log.exception("internal error in the agents' endpoint")
            body = {"detail": "Internal error.", "request_id": context.request_id}
            await _respond(send, Reply(500, body), context.request_id)


async def _serve(
    method: str, headers: dict[bytes, bytes], receive: Receive, send: Send, request_id: str
) -> None:
    token = _bearer(headers)
    if token is None or not await intake.token_known(token_hash(token)):
        await _respond(send, NO_TOKEN, request_id)
        return
    if _declared_length(headers) > MAX_BODY_BYTES:
        await _respond(send, TOO_LARGE, request_id)
        return
    body = await _read_body(receive)
    if body is None:
        return  # the agent hung up; it will post again
    reply, fanned_out = await intake.submit(read_post(token, method, body))
    if reply.status == 500:
        reply = Reply(500, {**reply.body, "request_id": request_id})
    await _respond(send, reply, request_id)
    await fanned_out  # the process stays busy with this post until its readings went out


def _bearer(headers: dict[bytes, bytes]) -> str | None:
    scheme, _, raw = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    return raw.strip() if scheme.lower() == "bearer" and raw.strip() else None


def _declared_length(headers: dict[bytes, bytes]) -> int:
    """The Content-Length the client declared; 0 if none (the body is then bounded as read)."""
    declared = headers.get(b"content-length", b"")
    return int(declared) if declared.isdigit() else 0


async def _read_body(receive: Receive) -> bytes | None:
    """The body, read no further than past MAX_BODY_BYTES; None if the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_BODY_BYTES or not message.get("more_body"):
            return b"".join(chunks)


def read_post(token: str, method: str, body: bytes) -> Received:
    """A post as `intake` takes it: parsed and checked, all but its token."""
    digest = token_hash(token)
    if method != "POST":
        return Received(digest, refusal=Reply(405, {"detail": "Only POST."}))
    if len(body) > MAX_BODY_BYTES:
        return Received(digest, refusal=TOO_LARGE)
    try:
        data = json.loads(body)
    except ValueError:
        return Received(digest, refusal=Reply(400, {"non_field_errors": ["the body is not JSON"]}))
    except RecursionError:  # the parser's depth limit; a batch nests three levels
        return Received(digest, refusal=TOO_DEEP)
    batch, errors = validate_batch(data)
    named = data.get("node") if isinstance(data, dict) else None
    return Received(digest, named, batch, errors)


async def _respond(send: Send, reply: Reply, request_id: str) -> None:
    body = json.dumps(reply.body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", request_id.encode()),
        (b"x-content-type-options", b"nosniff"),
    ]
    if reply.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="agent"'))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
