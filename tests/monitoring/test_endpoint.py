"""The agents' endpoint checks the token before it reads a body, reads no more than a batch can
hold, and answers a body too deep to parse with a 400; none of them stores anything."""

from __future__ import annotations

import json
import math
import time
from collections.abc import MutableMapping
from typing import Any

from asgiref.sync import async_to_sync

from monitoring import hot
from monitoring.endpoint import PATH, agent_samples
from monitoring.models import GpuMinute, JobMetrics, XidEvent
from monitoring.schema import MAX_GPU_SAMPLES, MAX_XIDS, POD_LENGTH
from monitoring.validation import GPU_FIELDS, MAX_BODY_BYTES, XID_FIELDS, Bound, validate_batch
from tests.monitoring.conftest import Rig, post

DEEP = "[" * 100_000 + "]" * 100_000


def _nothing_stored(rig: Rig) -> bool:
    return (
        not GpuMinute.objects.exists()
        and not XidEvent.objects.exists()
        and not JobMetrics.objects.for_team(rig.job.team).exists()
        and hot.latest([(rig.node.pk, 0)]) == {}
    )


def _call(headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any], int]:
    """Call the endpoint as uvicorn would; (status, reply, how often it read the body)."""
    reads: list[bytes] = []
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        reads.append(body)
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": PATH,
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("10.0.0.7", 40000),
    }
    async_to_sync(agent_samples)(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"]), len(reads)


def test_an_unknown_token_gets_401_before_the_body_is_read(rig: Rig) -> None:
    status, reply, reads = _call({"authorization": "Bearer gpn_garbage"}, DEEP.encode())
    assert (status, reads) == (401, 0)
    assert reply == {"detail": "A node token is required (Authorization: Bearer <token>)."}
    assert post(DEEP, "gpn_garbage").status_code == 401
    assert _nothing_stored(rig)


def test_a_body_nested_too_deeply_gets_400_naming_the_problem(rig: Rig) -> None:
    response = post(DEEP, rig.token)
    assert response.status_code == 400
    assert response.json() == {
        "non_field_errors": ["the body is JSON nested too deeply to be a batch"]
    }
    assert _nothing_stored(rig)


def test_a_declared_body_larger_than_a_batch_gets_413_unread(rig: Rig) -> None:
    headers = {"authorization": f"Bearer {rig.token}", "content-length": str(MAX_BODY_BYTES + 1)}
    status, reply, reads = _call(headers, b"{}")
    assert (status, reads) == (413, 0)
    assert reply["detail"].startswith(f"At most {MAX_BODY_BYTES} bytes per post")
    assert _nothing_stored(rig)


def test_a_body_larger_than_a_batch_gets_413(rig: Rig) -> None:
    response = post(" " * (MAX_BODY_BYTES + 1), rig.token)  # sent without a Content-Length
    assert response.status_code == 413
    assert _nothing_stored(rig)


def _longest(bound: Bound) -> int | float:
    return int(bound.high) if bound.integer else math.nextafter(bound.high, 0)


def test_the_largest_valid_batch_fits_the_body_limit() -> None:
    now = time.time()
    sample: dict[str, Any] = {key: _longest(bound) for key, bound in GPU_FIELDS.items()}
    sample.update(at=now, uuid="u" * 64, pod="n" * 63 + "/" + "p" * (POD_LENGTH - 64))
    xid = {**{key: _longest(bound) for key, bound in XID_FIELDS.items()}, "at": now}
    body = {
        "node": "n" * 253,
        "interval": math.nextafter(3600, 0),
        "gpus": [sample] * MAX_GPU_SAMPLES,
        "xids": [{**xid, "uuid": "u" * 64}] * MAX_XIDS,
    }
    assert validate_batch(body, now)[1] == {}
    assert len(json.dumps(body).encode()) <= MAX_BODY_BYTES
