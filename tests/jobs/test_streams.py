"""A member connected to a job's and a team's websocket receives its status changes."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from jobs.actions import cancel_job, submit_job
from jobs.spec import parse_spec
from portal.asgi import application
from tests.conftest import World, spec


def _session_cookie(user: Any) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _open(path: str, user: Any) -> WebsocketCommunicator:
    cookie = await database_sync_to_async(_session_cookie)(user)
    communicator = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://testserver"), (b"cookie", cookie)]
    )
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_member_receives_status_changes_of_their_job_and_team(world: World) -> None:
    job = await database_sync_to_async(submit_job)(
        world.vision, parse_spec(spec()), acting_user=world.bob
    )
    on_job = await _open(f"/ws/jobs/{job.pk}/", world.bob)
    on_team = await _open("/ws/teams/vision/", world.alice)
    outsider_team = await _open("/ws/teams/nlp/", world.carol)
    await database_sync_to_async(cancel_job)(job, acting_user=world.bob)
    for communicator in (on_job, on_team):
        message = await communicator.receive_json_from(timeout=5)
        assert message["type"] == "job.status"
        assert (message["job_id"], message["state"]) == (job.pk, "CANCELLED")
    assert await outsider_team.receive_nothing(timeout=0.3)
    for communicator in (on_job, on_team, outsider_team):
        await communicator.disconnect()
