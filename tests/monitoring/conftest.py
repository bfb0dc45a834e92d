"""A GPU node with an agent token, a job running on half its GPUs, and a batch builder."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.utils import timezone

from cluster.models import Node
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from monitoring.endpoint import PATH
from monitoring.tokens import rotate_node_token
from portal.asgi import application
from tests.conftest import World, spec

NODE = "h100-a-1"


@dataclass
class Rig:
    node: Node
    token: str
    job: Job


def run_on(job: Job, placement: dict[str, int]) -> Job:
    """Put a job in RUNNING with a placement, as the controller would after admission."""
    Job.unscoped.filter(pk=job.pk).update(
        state=State.RUNNING, placement=placement, started_at=timezone.now()
    )
    job.refresh_from_db()
    return job


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    # The world's four users cost a second and a half of PBKDF2 per test; nothing here logs in
    # with a password.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def rig(world: World) -> Rig:
    node = Node.objects.create(name=NODE, gpu_type=world.h100, gpu_capacity=8, ready=True)
    token = rotate_node_token(node)
    job = submit_job(world.vision, parse_spec(spec(gpus_per_node=4)), acting_user=world.bob)
    return Rig(node, token, run_on(job, {NODE: 4}))


def gpu_sample(index: int, at: float | None = None, **fields: Any) -> dict[str, Any]:
    sample: dict[str, Any] = {
        "index": index,
        "uuid": f"GPU-{index:04d}",
        "at": time.time() if at is None else at,
        "DCGM_FI_DEV_GPU_UTIL": 50 + index,
        "DCGM_FI_DEV_FB_USED": 1000.0 * index,
        "DCGM_FI_DEV_FB_FREE": 81559 - 1000.0 * index,
        "DCGM_FI_DEV_FB_TOTAL": 81559,
        "DCGM_FI_DEV_GPU_TEMP": 40 + index,
        "DCGM_FI_DEV_POWER_USAGE": 300.0,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 1_000_000,
    }
    sample.update(fields)
    return {k: v for k, v in sample.items() if v is not None}


def batch(gpus: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"node": NODE, "interval": 5, "gpus": gpus, "xids": [], **extra}


@dataclass
class Response:
    status_code: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)

    def __getitem__(self, header: str) -> str:
        return self.headers[header.lower()]


def post(body: Any, token: str | None, headers: dict[str, str] | None = None) -> Response:
    """POST a batch (or any body) to the agents' endpoint through the ASGI application, as
    uvicorn would; returns once the post's readings were fanned out."""
    return async_to_sync(apost)(body, token, headers)


async def apost(body: Any, token: str | None, headers: dict[str, str] | None = None) -> Response:
    """`post` for async tests (the endpoint's database work must not wait for the thread that
    `database_sync_to_async(post)` would block)."""
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    sent = {"content-type": "application/json", **(headers or {})}
    if token:
        sent["authorization"] = f"Bearer {token}"
    encoded = [(k.encode(), v.encode()) for k, v in sent.items()]
    communicator = HttpCommunicator(application, "POST", PATH, body=data, headers=encoded)
    response = await communicator.get_response(timeout=10)
    await communicator.wait(timeout=10)
    received = {k.decode().lower(): v.decode() for k, v in response["headers"]}
    return Response(response["status"], received, response["body"])
