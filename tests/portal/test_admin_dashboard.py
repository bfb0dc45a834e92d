"""The dashboard of a platform admin: the cluster at a glance, with a link to each page behind it;
researchers and leads keep their own dashboard and see nothing of the cluster's."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import Node
from monitoring import hot
from monitoring import models as monitoring_models
from monitoring.models import Alert, AlertRule, Incident
from tests.cluster.scripted import more_nodes, scripted_cluster
from tests.conftest import World

pytestmark = pytest.mark.django_db


def _get(user: User, url: str = "/") -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def _figures(page: str, gpu_type: str) -> dict[str, int]:
    row = re.search(rf'<tr data-gpu-type="{gpu_type}">(.*?)</tr>', page, re.S)
    assert row, f"no row for {gpu_type!r}"
    return {name: int(n) for name, n in re.findall(r'<td class="([\w-]+)">(\d+)</td>', row[1])}


def _alerts_and_incidents() -> dict[str, Incident]:
    now = timezone.now()
    rule = AlertRule.objects.create(name="hot", metric="DCGM_FI_DEV_GPU_TEMP", warning=80)
    for subject, level, state in (
        ("h100-a/gpu0", "critical", "firing"),
        ("h100-a/gpu1", "critical", "firing"),
        ("h100-a/gpu2", "warning", "firing"),
        ("h100-a/gpu3", "warning", "acknowledged"),  # seen to: not firing any more
        ("h100-a/gpu4", "warning", "pending"),  # not yet past its duration
        ("h100-a/gpu5", "critical", "resolved"),
    ):
        Alert.objects.create(
            rule=rule, subject=subject, level=level, state=state, value=90, started_at=now
        )
    return {
        title: Incident.objects.create(
            title=title, state=state, action="cordon", opened_at=now - timedelta(hours=i)
        )
        for i, (title, state) in enumerate(
            (("Xid 79 on h100-a", "open"), ("NVLink down", "open"), ("old fault", "resolved"))
        )
    }


def test_an_admin_sees_gpus_in_use_free_and_unhealthy_by_type(world: World) -> None:
    scripted_cluster(world)
    page = _get(world.admin)
    # h100: a holds 6 (running 4, admitted 2) with 1 free and gpu7 unhealthy; b is cordoned
    # and c NotReady, so their 16 healthy GPUs are neither in use nor free.
    assert _figures(page, "h100-80g") == {
        "in-use": 6, "free": 1, "unhealthy": 1, "held-back": 16, "installed": 24
    }  # fmt: skip
    assert _figures(page, "a100-80g") == {
        "in-use": 3, "free": 5, "unhealthy": 0, "held-back": 0, "installed": 8
    }  # fmt: skip
    assert _figures(page, "") == {
        "in-use": 9, "free": 6, "unhealthy": 1, "held-back": 16, "installed": 32
    }  # fmt: skip


def test_gpus_of_a_node_of_no_known_type_are_shown_by_label_and_never_free(world: World) -> None:
    # The scheduler places only on nodes of a known GPU type: nothing on this one is free.
    node = Node.objects.create(name="l4-a", product_label="NVIDIA-L4", gpu_capacity=4, ready=True)
    node.gpu_allocatable = 4
    node.save()
    assert _figures(_get(world.admin), "NVIDIA-L4") == {
        "in-use": 0, "free": 0, "unhealthy": 0, "held-back": 4, "installed": 4
    }  # fmt: skip


def test_an_admin_sees_firing_alerts_by_level_and_open_incidents_with_links(
    world: World,
) -> None:
    incidents = _alerts_and_incidents()
    page = _get(world.admin)
    firing = dict(re.findall(r'data-level="(\w+)">[^<]*?(\d+)</span>', page))
    assert firing == {"critical": "2", "warning": "1"}
    assert '<span class="open-incidents">2</span>' in page
    for title in ("Xid 79 on h100-a", "NVLink down"):
        assert f'href="/incidents/{incidents[title].pk}/">{title}</a>' in page
    assert "old fault" not in page
    for link in ("/alerts/", "/incidents/", "/manage/nodes/", "/cluster/"):
        assert f'href="{link}"' in page


def test_the_heatmap_cells_carry_their_utilisation_band(world: World) -> None:
    scripted = scripted_cluster(world)
    node = scripted.nodes["h100-a"]
    readings = {0: 95, 1: 10, 2: 50, 3: 19.6, 4: 80, 5: 0}
    hot.store({node.pk: {i: {"DCGM_FI_DEV_GPU_UTIL": u} for i, u in readings.items()}})
    for page in (_get(world.admin), _get(world.admin, "/cluster/")):
        row = re.search(r'<tr data-node="h100-a"[^>]*>(.*?)</tr>', page, re.S)
        assert row
        cells = re.findall(r'<td class="gpu([^"]*)" data-index="(\d)"', row[1])
        bands = {int(index): classes.split() for classes, index in cells}
        assert bands == {
            0: ["util-4"], 1: ["util-0"], 2: ["util-2"], 3: ["util-1"], 4: ["util-4"],
            5: ["util-0"], 6: ["silent"], 7: ["faulty", "silent"],
        }  # fmt: skip
        assert "20%" in row[1]  # 19.6 shows, and is coloured, as 20
        assert "/static/js/live.css" in page  # the stylesheet that gives the bands their colours
        assert 'class="legend util-4">80–100%</span>' in page


def test_the_navigation_links_the_heatmap_for_admins_only(world: World) -> None:
    assert 'href="/cluster/"' in _get(world.admin, "/jobs/")
    assert 'href="/cluster/"' not in _get(world.alice, "/jobs/")


def test_a_researcher_sees_no_cluster_figures(world: World) -> None:
    scripted = scripted_cluster(world)
    _alerts_and_incidents()
    for user in (world.bob, world.alice, world.carol):
        page = _get(user)
        assert "data-gpu-type" not in page and 'id="heatmap"' not in page
        assert "open-incidents" not in page and "Xid 79 on h100-a" not in page
        assert 'href="/cluster/"' not in page and "h100-a" not in page
    # bob keeps his own dashboard: his active jobs and his team's quota.
    page = _get(world.bob)
    assert f'href="/jobs/{scripted.running.pk}/"' in page
    assert "My teams' GPUs against quota" in page and 'data-team-live="vision"' in page


def test_an_admin_in_no_team_is_told_why_there_are_no_jobs_or_quota(world: World) -> None:
    page = _get(world.admin)
    assert "No jobs." not in page and "No quota." not in page
    assert "You are in no team" in page and 'href="/manage/teams/"' in page


def test_a_researcher_in_no_team_is_told_whom_to_ask(world: World) -> None:
    dave = User.objects.create_user("dave")
    page = _get(dave)
    assert "Ask a team's lead to add you." in page
    assert "Cluster at a glance" not in page


def test_an_admin_in_a_team_also_keeps_their_own_part(world: World) -> None:
    world.alice.is_staff = True
    world.alice.save()
    page = _get(world.alice)
    assert "Cluster at a glance" in page and 'data-team-live="vision"' in page


def _queries(world: World) -> int:
    client = Client()
    client.force_login(world.admin)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/").status_code == 200
    return len(queries)


def test_the_admin_dashboard_queries_do_not_grow_with_the_cluster(world: World) -> None:
    scripted_cluster(world)
    _alerts_and_incidents()
    few = _queries(world)
    more_nodes(world, 8)
    assert _queries(world) == few <= 16


def test_an_admin_of_a_cluster_without_nodes_is_told_so(world: World) -> None:
    page = _get(world.admin)
    assert "No nodes seen yet" in page and "data-gpu-type=" not in page


def test_an_admin_sees_the_last_health_inspection_with_links(world: World) -> None:
    # The inspections (monitoring.models.InspectionRun) are merged apart from this page.
    run_model = getattr(monitoring_models, "InspectionRun", None)
    if run_model is None:
        pytest.skip("monitoring.models.InspectionRun is not merged yet")
    now = timezone.now()
    run_model.objects.create(started_at=now - timedelta(days=1), finished_at=now, trigger="admin")
    last = run_model.objects.create(
        started_at=now - timedelta(hours=1),
        finished_at=now,
        trigger="schedule",
        nodes_passed=7,
        nodes_failed=1,
    )
    item = re.search(r'<li class="inspection">(.*?)</li>', _get(world.admin), re.S)
    assert item
    assert f'href="/inspections/{last.pk}/"' in item[1] and 'href="/inspections/"' in item[1]
    assert "7 nodes passed" in item[1] and "1 failed" in item[1]
    assert "Last health inspection" not in _get(world.bob)
