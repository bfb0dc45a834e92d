"""The Django admin shows an out-of-range weight or priority beside its field, saving nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from quotas.models import Queue
from tenants.models import Team
from tests.conftest import World

pytestmark = pytest.mark.django_db


def _admin(world: World) -> Client:
    client = Client()
    client.force_login(world.admin)
    return client


def test_the_team_admin_refuses_a_weight_out_of_bounds(world: World) -> None:
    url = f"/admin/tenants/team/{world.vision.pk}/change/"
    form = {"slug": "vision", "name": world.vision.name, "fair_share_weight": "1e16"}
    if world.vision.parent_id:
        form["parent"] = str(world.vision.parent_id)
    response = _admin(world).post(url, form)
    assert response.status_code == 200  # the form again, not a redirect nor a 500
    assert b"at most 1000" in response.content
    assert Team.objects.get(pk=world.vision.pk).fair_share_weight != 1e16


def test_the_queue_admin_refuses_a_priority_out_of_range(world: World) -> None:
    queue = Queue.objects.for_team(world.vision).first()
    assert queue is not None
    url = f"/admin/quotas/queue/{queue.pk}/change/"
    form = {
        "team": str(world.vision.pk),
        "name": queue.name,
        "priority": str(2**31 - 1),
        "max_runtime": str(queue.max_runtime),
    }
    response = _admin(world).post(url, form)
    assert response.status_code == 200
    assert b"outside the queue priorities" in response.content
    assert Queue.objects.for_team(world.vision).get(pk=queue.pk).priority == queue.priority
