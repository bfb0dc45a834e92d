"""The agents' endpoint: `POST /api/v1/agent/samples/` with a node token (Bearer).

The view is async so the fan-out to websocket groups happens on the event loop; the database
work runs in Django's one sync thread, which is the bottleneck, and is kept free of it.
"""

from __future__ import annotations

import json

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from jobs.streams import Outgoing, send_all
from monitoring.ingest import ingest_batch
from monitoring.tokens import node_for_token
from monitoring.validation import validate_batch

MAX_BODY_BYTES = 16 * 2**20  # room for schema.MAX_GPU_SAMPLES samples of every field


def _refuse(status: int, detail: str) -> JsonResponse:
    response = JsonResponse({"detail": detail}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="agent"'
    return response


def _receive(request: HttpRequest) -> tuple[HttpResponse, Outgoing]:
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    node = node_for_token(raw.strip()) if scheme.lower() == "bearer" and raw.strip() else None
    if node is None:
        return _refuse(401, "A node token is required (Authorization: Bearer <token>)."), []
    if request.method != "POST":
        return _refuse(405, "Only POST."), []
    # Read past Django's form-sized body limit: a backlog post is bigger, and bounded here.
    body = request.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        return _refuse(413, f"At most {MAX_BODY_BYTES} bytes per post."), []
    try:
        data = json.loads(body)
    except ValueError:
        return JsonResponse({"non_field_errors": ["the body is not JSON"]}, status=400), []
    node_id, node_name = node
    batch, errors = validate_batch(data, node_name)
    if batch is None:
        status = 403 if list(errors) == ["node"] else 400
        return JsonResponse(errors, status=status), []
    outgoing = ingest_batch(node_id, node_name, batch)
    accepted = {"accepted": len(batch.gpus), "xids": len(batch.xids)}
    return JsonResponse(accepted, status=202), outgoing


@csrf_exempt  # machines post with a token, never with a browser's cookies
async def agent_samples(request: HttpRequest) -> HttpResponse:
    response, outgoing = await sync_to_async(_receive)(request)
    await send_all(outgoing)  # after the commit: ingest_batch's transaction has closed
    return response
