"""Incident pages for admins: the post-mortem, returning GPUs, the CSV export; none for others."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from cluster.models import Gpu, Node
from monitoring.models import Incident
from tests.conftest import World
from tests.notifications.eager import eager_celery  # noqa: F401 (autouse)

pytestmark = pytest.mark.django_db


def _as(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def incident(world: World) -> Incident:
    node = Node.objects.create(name="h100-a-1", gpu_type=world.h100, gpu_capacity=8, ready=True)
    Gpu.objects.create(node=node, index=2, healthy=False)
    return Incident.objects.create(
        title="reboot on h100-a-1",
        action="reboot",
        opened_at=timezone.now(),
        nodes=["h100-a-1"],
        gpus=["h100-a-1/2"],
        jobs=[],
        teams=["vision"],
    )


def test_an_admin_writes_the_postmortem_and_resolves(world: World, incident: Incident) -> None:
    admin = _as(world.admin)
    assert "reboot on h100-a-1" in admin.get("/incidents/").content.decode()
    response = admin.post(
        f"/incidents/{incident.pk}/",
        {"root_cause": "=bad PSU", "follow_ups": "swap PSU", "resolve": "on"},
    )
    assert response.status_code == 302
    incident.refresh_from_db()
    assert (incident.state, incident.root_cause) == ("resolved", "=bad PSU")
    assert AuditEvent.chain.filter(action="incident.update", target_id=str(incident.pk)).exists()
    admin.post(f"/incidents/{incident.pk}/", {"action": "return_gpus"})
    assert Gpu.objects.get(index=2).healthy
    response = admin.get("/incidents/export.csv")
    export = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    assert "reboot on h100-a-1" in export and "'=bad PSU" in export  # no formula
    timeline = list(incident.events.values_list("kind", flat=True))
    assert timeline == ["resolved", "action"]


def test_others_get_no_incident_page(world: World, incident: Incident) -> None:
    for user in (world.alice, world.carol):
        client = _as(user)
        for url in ("/incidents/", f"/incidents/{incident.pk}/", "/incidents/export.csv"):
            assert client.get(url).status_code == 403, url
        client.post(f"/incidents/{incident.pk}/", {"root_cause": "x", "resolve": "on"})
    incident.refresh_from_db()
    assert incident.state == "open" and incident.root_cause == ""
