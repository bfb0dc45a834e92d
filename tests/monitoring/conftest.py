"""A GPU node with an agent token, a job running on half its GPUs, and a batch builder."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import Node
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from monitoring.tokens import rotate_node_token
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


def post(body: Any, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client().post(
        "/api/v1/agent/samples/", body, content_type="application/json", headers=headers
    )
