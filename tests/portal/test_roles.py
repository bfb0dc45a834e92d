"""The demo's roles: agents started for a portal that has stopped rotate no node's token."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from cluster.models import Node
from portal import roles

pytestmark = pytest.mark.django_db


def test_agents_stopped_while_waiting_for_nodes_rotate_no_token() -> None:
    # A portal stopped before its controller listed any node (a test that never started it)
    # must not wake later and take over the tokens of the next portal's nodes.
    stop = threading.Event()
    stop.set()
    sim: Any = None  # never reached
    roles.start_agents(sim, "http://127.0.0.1:9", stop, 1.0)
    Node.objects.create(name="n-0", agent_token_hash="kept")
    roles.start_agents(sim, "http://127.0.0.1:9", stop, 1.0)
    assert Node.objects.get(name="n-0").agent_token_hash == "kept"
