"""The admins' nodes page: GPUs in use and free beside allocatable, and each node's health."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from tests.cluster.scripted import more_nodes, scripted_cluster
from tests.conftest import World

pytestmark = pytest.mark.django_db


def _page(user: Any) -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/manage/nodes/")
    assert response.status_code == 200
    return response.content.decode()


def _row(page: str, node: str) -> str:
    found = re.search(rf'<tr data-node="{node}">(.*?)</tr>', page, re.S)
    assert found, f"no row for {node}"
    return found.group(1)


def _cell(row: str, name: str) -> str:
    found = re.search(rf'<td class="{name}">(.*?)</td>', row, re.S)
    assert found, f"no {name} cell"
    return found.group(1).strip()


def test_it_shows_gpus_in_use_and_free_beside_allocatable(world: World) -> None:
    scripted_cluster(world)
    page = _page(world.admin)
    # h100-a: a running job holds 4 and an admitted one 2; gpu7 is unhealthy, so 1 is free.
    # The finished job's stale placement on h100-b and the queued job hold nothing.
    figures = {
        node: (_cell(_row(page, node), "in-use"), _cell(_row(page, node), "free"))
        for node in ("h100-a", "h100-b", "h100-c", "a100-a")
    }
    assert figures == {
        "h100-a": ("6", "1"),
        "h100-b": ("0", "0"),  # cordoned: nothing is free on it
        "h100-c": ("0", "0"),  # NotReady
        "a100-a": ("3", "5"),
    }
    assert "<td>8/8</td>" in _row(page, "h100-a")  # allocatable/capacity, as before


def test_it_shows_each_nodes_health(world: World) -> None:
    scripted_cluster(world)
    page = _page(world.admin)
    faulty, cordoned, down = (_row(page, n) for n in ("h100-a", "h100-b", "h100-c"))
    health = _cell(faulty, "health")
    assert "1 unhealthy" in health and "h100-a/gpu7 (last Xid 79)" in health
    assert "healthy</span>" in _cell(cordoned, "health") and "unhealthy" not in cordoned
    assert "cordoned: disk swap" in cordoned and "Uncordon" in cordoned
    assert "NotReady" in down and "NotReady" not in faulty
    assert 'datetime="2026-03-01T12:00:00+00:00"' in down and "heartbeat" in down


def test_a_node_that_never_reported_says_so(world: World) -> None:
    scripted_cluster(world)
    world.h100.nodes.filter(name="h100-c").update(last_heartbeat=None)
    assert "no heartbeat yet" in _row(_page(world.admin), "h100-c")


def test_its_queries_do_not_grow_with_the_nodes(
    world: World, django_assert_max_num_queries: Any
) -> None:
    scripted_cluster(world)
    more_nodes(world, 6)
    client = Client()
    client.force_login(world.admin)
    with django_assert_max_num_queries(8):
        page = client.get("/manage/nodes/").content.decode()
    assert page.count("<tr data-node=") == 10
    assert _cell(_row(page, "h100-extra-5"), "in-use") == "1"


def test_only_admins_see_it(world: World) -> None:
    client = Client()
    client.force_login(world.alice)
    assert client.get("/manage/nodes/").status_code == 403
