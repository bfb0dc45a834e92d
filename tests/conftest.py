"""The shared test base: three people and an admin (STYLE.md point 6).

alice leads team vision, bob is her teammate, carol is an outsider in team nlp; admin is staff.
vision and nlp are sub-teams of the department research.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from channels.layers import channel_layers
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from quotas.models import GpuType, Queue, Quota
from tenants.models import Membership, Role, Team

PASSWORD = "correct-horse-battery"


@dataclass
class World:
    admin: User
    alice: User
    bob: User
    carol: User
    research: Team
    vision: Team
    nlp: Team
    h100: GpuType
    a100: GpuType
    vision_normal: Queue
    nlp_normal: Queue


def _user(name: str, **extra: Any) -> User:
    return User.objects.create_user(name, f"{name}@example.org", PASSWORD, **extra)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # PBKDF2 at its production cost would spend seconds per test creating the four users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _clear_cache() -> None:
    # Throttle counters live in the cache; a shared Redis must not carry them between tests.
    cache.clear()


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> Iterator[None]:
    # The in-memory layer's queues belong to the event loop of the test that made them, gone
    # after it: a later test's server must not wait on, or send to, an earlier test's queues.
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def checkpoint_file(settings: Any, tmp_path: Path) -> Path:
    # Each test anchors its audit chain in a checkpoint file of its own: a file under VAR_DIR
    # outlives the test database, and a checkpoint another test left there would anchor a
    # chain this test never wrote.
    settings.AUDIT_CHECKPOINT_FILE = tmp_path / "audit-checkpoints.jsonl"
    return Path(settings.AUDIT_CHECKPOINT_FILE)


@pytest.fixture
def world(db: None) -> World:
    h100 = GpuType.objects.create(
        name="h100-80g",
        product_label="NVIDIA-H100-80GB-HBM3",
        memory_gb=80,
        gpus_per_node=8,
        price_per_gpu_hour=Decimal("2.5"),
    )
    a100 = GpuType.objects.create(
        name="a100-80g", product_label="NVIDIA-A100-SXM4-80GB", memory_gb=80, gpus_per_node=8
    )
    research = Team.objects.create(slug="research", name="Research")
    vision = Team.objects.create(slug="vision", name="Vision", parent=research)
    nlp = Team.objects.create(slug="nlp", name="Language", parent=research)
    for team, guaranteed, limit in ((research, 32, 48), (vision, 16, 32), (nlp, 16, 32)):
        Quota.objects.create(team=team, gpu_type=h100, guaranteed=guaranteed, limit=limit)
    queues = {}
    for team in (vision, nlp):
        for name, priority, preemptible in (
            ("high", 200, False),
            ("normal", 100, False),
            ("low", 50, True),
        ):
            queues[team.slug, name] = Queue.objects.create(
                team=team,
                name=name,
                priority=priority,
                preemptible=preemptible,
                max_runtime=86400,
            )
    world = World(
        admin=_user("admin", is_staff=True, is_superuser=True),
        alice=_user("alice"),
        bob=_user("bob"),
        carol=_user("carol"),
        research=research,
        vision=vision,
        nlp=nlp,
        h100=h100,
        a100=a100,
        vision_normal=queues["vision", "normal"],
        nlp_normal=queues["nlp", "normal"],
    )
    Membership.objects.create(team=vision, user=world.alice, role=Role.LEAD)
    Membership.objects.create(team=vision, user=world.bob, role=Role.MEMBER)
    Membership.objects.create(team=nlp, user=world.carol, role=Role.MEMBER)
    return world


def api_as(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def spec(**overrides: Any) -> dict[str, Any]:
    """A valid job spec for team vision; override any field."""
    base: dict[str, Any] = {
        "name": "train-resnet",
        "team": "vision",
        "image": "registry.example/vision/train:1.0",
        "command": ["python", "train.py"],
        "gpu_type": "h100-80g",
        "gpus_per_node": 1,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}
