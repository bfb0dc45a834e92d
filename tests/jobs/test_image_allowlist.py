"""A team's image allow-list admits images by registry host and whole path segments."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db


def test_a_host_entry_does_not_admit_a_longer_host(world: World) -> None:
    world.vision.image_allowlist = "registry.corp.example"
    world.vision.save()
    response = api_as(world.bob).post(
        "/api/v1/jobs/", spec(image="registry.corp.example.evil.io/x:1"), format="json"
    )
    assert response.status_code == 400
    assert "allow-list" in response.json()["image"][0]
    assert Job.objects.for_user(world.admin).count() == 0


def test_a_host_entry_admits_images_under_it(world: World) -> None:
    world.vision.image_allowlist = "registry.corp.example"
    world.vision.save()
    response = api_as(world.bob).post(
        "/api/v1/jobs/", spec(image="registry.corp.example/team/train:1.0"), format="json"
    )
    assert response.status_code == 201, response.json()
