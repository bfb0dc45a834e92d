"""Quota what-if: real submissions of a window replayed as things are and as asked, side by side.

The scripted window (fixed times, 2026-03-01 from midnight UTC): vision sends eight 8-GPU jobs
of an hour on h100 (2 nodes of 8), one a minute; nlp sends four 8-GPU jobs of an hour on a100
(1 node of 8). Each type has one team's jobs, so nothing on one type moves the other's order.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent
from cluster import whatif_run
from cluster.models import Node, WhatIf, WhatIfState
from cluster.whatif import SubmittedJob, resize, runtime, with_quotas
from cluster.whatif_tasks import run_whatif
from jobs.models import Job, State
from quotas.models import GpuType, Queue, Quota
from scheduler import NodeState, QuotaInfo
from tenants.models import Membership, Role, Team
from tests.conftest import World
from tests.notifications.eager import eager_celery as eager_celery  # tasks run in the test

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
WINDOW = {"window_start": "2026-03-01T00:00", "window_end": "2026-03-02T00:00"}
Capture = Callable[..., Any]


def _signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _node(name: str, gpu_type: GpuType) -> None:
    Node.objects.create(
        name=name,
        gpu_type=gpu_type,
        product_label=gpu_type.product_label,
        gpu_capacity=8,
        gpu_allocatable=8,
        ready=True,
    )


def _job(owner: User, queue: Queue, gpu_type: GpuType, gpus: int, submitted: datetime) -> Job:
    """A job that really ran for an hour from its submission."""
    job = Job.unscoped.create(
        team=queue.team,
        owner=owner,
        queue=queue,
        gpu_type=gpu_type,
        name="train",
        image="registry.example/train:1",
        gpus_per_node=gpus,
        cpu=Decimal(1),
        memory="1Gi",
        max_runtime=4 * 3600,
        state=State.SUCCEEDED,
    )
    times = {"submitted_at": submitted, "started_at": submitted, "finished_at": submitted + HOUR}
    Job.unscoped.filter(pk=job.pk).update(**times)
    return job


@pytest.fixture
def window(world: World) -> World:
    for name in ("h100-a", "h100-b"):
        _node(name, world.h100)
    _node("a100-a", world.a100)
    for team in (world.research, world.nlp):
        Quota.objects.create(team=team, gpu_type=world.a100, guaranteed=8, limit=8)
    nlp_normal = Queue.objects.for_team(world.nlp).get(name="normal")
    for i in range(8):
        _job(world.bob, world.vision_normal, world.h100, 8, T0 + i * timedelta(minutes=1))
    for i in range(4):
        _job(world.carol, nlp_normal, world.a100, 8, T0 + i * timedelta(minutes=1))
    return world


@pytest.fixture
def dora(world: World) -> User:
    """The research department's lead (vision and nlp are its sub-teams)."""
    user = User.objects.create_user("dora", "dora@example.org", "x")
    Membership.objects.create(team=world.research, user=user, role=Role.LEAD)
    return user


def _ask(client: Client, capture: Capture, fields: dict[str, str] | None = None) -> Any:
    with capture(execute=True):
        return client.post(reverse("whatif-list"), {**WINDOW, **(fields or {})})


def _figures(whatif: WhatIf, section: str, name: str, figure: str) -> tuple[float, float]:
    pair = whatif.results[section][name]
    return pair["current"][figure], pair["changed"][figure]


# Pure helpers


def _submitted(**times: float | None) -> SubmittedJob:
    base: dict[str, Any] = {"submitted": 0.0, "started": None, "finished": None}
    return SubmittedJob(
        1,
        "vision",
        "bob",
        "h100-80g",
        1,
        8,
        "img",
        **{**base, **times},
        runtime_limit_s=7200.0,
        priority=100,
        preemptible=False,
    )


def test_a_job_runs_for_its_real_runtime_or_its_limit_cut_at_the_window_end() -> None:
    assert runtime(_submitted(started=100.0, finished=400.0), 10_000.0) == 300.0
    assert runtime(_submitted(), 10_000.0) == 7200.0  # waiting still: its limit
    assert runtime(_submitted(), 600.0) == 600.0  # ... cut at the window's end
    assert runtime(_submitted(started=500.0), 600.0) == 100.0  # running still
    assert runtime(_submitted(finished=50.0), 600.0) is None  # cancelled while it waited


def test_resize_adds_and_takes_away_whole_nodes_of_one_type() -> None:
    nodes = (
        NodeState("h-1", "h100", 8, 8),
        NodeState("h-2", "h100", 8, 8),
        NodeState("a-1", "a100", 8, 8),
    )
    grown = resize(nodes, {"h100": 16}, {"h100": 8})
    assert sum(n.total_gpus for n in grown if n.gpu_type == "h100") == 32
    assert [n.name for n in grown if n.gpu_type == "a100"] == ["a-1"]
    shrunk = resize(nodes, {"h100": -8}, {"h100": 8})
    assert [n.name for n in shrunk] == ["h-1", "a-1"]


def test_a_quota_change_replaces_the_teams_quota_of_that_type_only() -> None:
    quotas = (QuotaInfo("vision", "h100", 8, 16), QuotaInfo("vision", "a100", 4, 4))
    changed = with_quotas(quotas, [QuotaInfo("vision", "h100", 0, 16)])
    assert set(changed) == {QuotaInfo("vision", "h100", 0, 16), QuotaInfo("vision", "a100", 4, 4)}


# Replays through the pages and the task


@pytest.mark.django_db
def test_adding_gpus_of_a_type_lowers_its_waits_and_leaves_the_other_type_alone(
    window: World, django_capture_on_commit_callbacks: Capture
) -> None:
    response = _ask(
        _signed_in(window.admin), django_capture_on_commit_callbacks, {"gpus:h100-80g": "16"}
    )
    whatif = WhatIf.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("whatif-detail", args=[whatif.pk])
    assert whatif.state == WhatIfState.DONE and whatif.progress == 100
    for figure in ("wait_p50_s", "wait_p90_s"):
        before, after = _figures(whatif, "gpu_types", "h100-80g", figure)
        assert after < before, figure
        before, after = _figures(whatif, "teams", "vision", figure)
        assert after < before, figure
    assert _figures(whatif, "gpu_types", "h100-80g", "wait_p50_s") == (116 * 60, 56 * 60)
    assert (
        whatif.results["gpu_types"]["a100-80g"]["current"]
        == (whatif.results["gpu_types"]["a100-80g"]["changed"])
    )
    assert whatif.results["teams"]["nlp"]["current"] == whatif.results["teams"]["nlp"]["changed"]
    assert _figures(whatif, "gpu_types", "h100-80g", "gpus") == (16, 32)
    assert _figures(whatif, "teams", "vision", "jobs") == (8, 8)


@pytest.mark.django_db
def test_lowering_a_teams_guarantee_raises_its_median_wait_under_capacity(
    world: World, django_capture_on_commit_callbacks: Capture, settings: Any
) -> None:
    settings.SCHEDULER_POLICY = "capacity"
    for name in ("h100-a", "h100-b"):
        _node(name, world.h100)
    Quota.unscoped.filter(team__in=[world.vision, world.nlp]).update(guaranteed=8, limit=16)
    # nlp fills the cluster and more; a minute later vision asks for its guarantee back.
    for i in range(8):
        _job(world.carol, world.nlp_normal, world.h100, 4, T0 + timedelta(seconds=i))
    for i in range(4):
        _job(world.bob, world.vision_normal, world.h100, 4, T0 + timedelta(seconds=60 + i))
    _ask(
        _signed_in(world.admin),
        django_capture_on_commit_callbacks,
        {
            "guaranteed:vision:h100-80g": "0",
            "limit:vision:h100-80g": "16",
        },
    )
    whatif = WhatIf.objects.get()
    assert whatif.policy == "capacity"
    before, after = _figures(whatif, "teams", "vision", "wait_p50_s")
    assert after > before
    assert whatif.changes["quotas"] == [
        {
            "team": "vision",
            "gpu_type": "h100-80g",
            "guaranteed": 0,
            "limit": 16,
            "before": {"guaranteed": 8, "limit": 16},
        }
    ]
    assert Quota.objects.for_team(world.vision).get(gpu_type=world.h100).guaranteed == 8


@pytest.mark.django_db
def test_progress_climbs_to_100_and_the_results_are_kept_once(
    window: World, django_capture_on_commit_callbacks: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    real = whatif_run._update

    def recording(whatif_id: int, **fields: Any) -> None:
        if "progress" in fields:
            seen.append(fields["progress"])
        real(whatif_id, **fields)

    monkeypatch.setattr(whatif_run, "_update", recording)
    _ask(_signed_in(window.admin), django_capture_on_commit_callbacks)
    whatif = WhatIf.objects.get()
    assert seen == sorted(seen) and seen[0] == 0 and seen[-1] == 100 and len(seen) > 2
    assert whatif.results["cluster"]["all"]["current"]["gpus"] == 24
    assert whatif.finished_at is not None
    finished = whatif.finished_at
    assert run_whatif(whatif.pk) is None  # delivered again: not rerun
    whatif.refresh_from_db()
    assert whatif.finished_at == finished
    event = AuditEvent.chain.get(action="cluster.whatif")
    assert event.actor_name == "admin" and event.after["changes"] == {"quotas": [], "gpus": {}}


@pytest.mark.django_db
def test_a_failed_replay_is_kept_on_the_row(
    window: World, django_capture_on_commit_callbacks: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("simulator exploded")

    monkeypatch.setattr(whatif_run, "compare", broken)
    response = _ask(_signed_in(window.admin), django_capture_on_commit_callbacks)
    whatif = WhatIf.objects.get()
    assert response.status_code == 302
    assert whatif.state == WhatIfState.FAILED and "replay failed" in whatif.error
    assert "exploded" not in whatif.error  # internals stay in the log
    page = _signed_in(window.admin).get(reverse("whatif-detail", args=[whatif.pk]))
    assert "replay failed" in page.content.decode()


# Who may ask what


@pytest.mark.django_db
def test_a_department_lead_changes_only_the_departments_teams(
    window: World, dora: User, django_capture_on_commit_callbacks: Capture
) -> None:
    client = _signed_in(dora)
    refused = [
        {"guaranteed:research:h100-80g": "16", "limit:research:h100-80g": "48"},  # not a sub-team
        {"gpus:h100-80g": "8"},  # GPUs: admins only
    ]
    for fields in refused:
        assert _ask(client, django_capture_on_commit_callbacks, fields).status_code == 403
    ops = Team.objects.create(slug="ops", name="Ops")
    Quota.objects.create(team=ops, gpu_type=window.h100, guaranteed=0, limit=8)
    response = _ask(
        client,
        django_capture_on_commit_callbacks,
        {"guaranteed:ops:h100-80g": "8", "limit:ops:h100-80g": "8"},
    )
    assert response.status_code == 403
    assert not WhatIf.objects.exists() and not AuditEvent.chain.filter(action="cluster.whatif")
    response = _ask(
        client,
        django_capture_on_commit_callbacks,
        {
            "guaranteed:vision:h100-80g": "8",
            "limit:vision:h100-80g": "32",
            # unchanged rows of teams she may not change are no change
            "guaranteed:research:h100-80g": "32",
            "limit:research:h100-80g": "48",
        },
    )
    assert response.status_code == 302
    assert WhatIf.objects.get().changes["quotas"][0]["team"] == "vision"


@pytest.mark.django_db
def test_a_team_lead_or_member_may_not_ask(
    window: World, django_capture_on_commit_callbacks: Capture
) -> None:
    for user in (window.alice, window.carol):
        client = _signed_in(user)
        assert "run the what-if" not in client.get(reverse("whatif-list")).content.decode().lower()
        assert _ask(client, django_capture_on_commit_callbacks).status_code == 403
    assert not WhatIf.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "field", "limit"),
    [
        ({"window_end": "2026-04-10T00:00"}, "window_end", "31"),
        ({"window_end": "2026-02-28T00:00"}, "window_end", "after window_start"),
        ({"window_start": "yesterday"}, "window_start", "2026-03-01T12:00"),
        ({"gpus:h100-80g": "4"}, "gpus:h100-80g", "holds 8 GPUs"),
        ({"gpus:h100-80g": "-24"}, "gpus:h100-80g", "the cluster has 16"),
        (
            {"guaranteed:vision:h100-80g": "40", "limit:vision:h100-80g": "32"},
            "guaranteed:vision",
            "limit of 32",
        ),
        (
            {"guaranteed:vision:h100-80g": "24", "limit:vision:h100-80g": "32"},
            "guaranteed:vision",
            "the department has 32",
        ),
    ],
)
def test_bad_asks_are_refused_naming_the_field_and_the_limit(
    window: World,
    django_capture_on_commit_callbacks: Capture,
    fields: dict[str, str],
    field: str,
    limit: str,
) -> None:
    response = _ask(_signed_in(window.admin), django_capture_on_commit_callbacks, fields)
    body = response.content.decode()
    assert response.status_code == 400
    assert field in body and limit in body
    assert not WhatIf.objects.exists() and not AuditEvent.chain.filter(action="cluster.whatif")


@pytest.mark.django_db
def test_a_window_with_too_many_jobs_is_refused(
    window: World, django_capture_on_commit_callbacks: Capture, settings: Any
) -> None:
    settings.WHATIF_MAX_JOBS = 10
    response = _ask(_signed_in(window.admin), django_capture_on_commit_callbacks)
    body = response.content.decode()
    assert response.status_code == 400
    assert "window_start" in body and "12 jobs" in body and "at most 10" in body
    assert not WhatIf.objects.exists()


@pytest.mark.django_db
def test_a_window_grown_past_the_limit_by_the_time_it_runs_fails_naming_it(
    window: World, settings: Any
) -> None:
    whatif = WhatIf.objects.create(
        requested_by=window.admin,
        requested_at=T0,
        window_start=T0,
        window_end=T0 + 24 * HOUR,
        policy="fair",
    )
    settings.WHATIF_MAX_JOBS = 5
    assert run_whatif(whatif.pk) == "failed"
    whatif.refresh_from_db()
    assert "window_start" in whatif.error and "at most 5" in whatif.error
    assert whatif.results == {}


# The pages


@pytest.mark.django_db
def test_the_result_page_shows_the_figures_side_by_side(
    window: World, django_capture_on_commit_callbacks: Capture
) -> None:
    client = _signed_in(window.admin)
    _ask(client, django_capture_on_commit_callbacks, {"gpus:h100-80g": "16"})
    page = client.get(reverse("whatif-detail", args=[WhatIf.objects.get().pk])).content.decode()
    assert "116.0 → 56.0" in page  # h100's and vision's median wait, in minutes
    assert "16 → 32" in page  # h100 GPUs
    assert "h100-80g: 16 GPUs" in page
    assert 'http-equiv="refresh"' not in page  # done: nothing to wait for


@pytest.mark.django_db
def test_a_running_what_if_refreshes_its_page(world: World) -> None:
    whatif = WhatIf.objects.create(
        requested_by=world.admin,
        requested_at=T0,
        window_start=T0,
        window_end=T0 + HOUR,
        policy="fair",
        state=WhatIfState.RUNNING,
        progress=55,
    )
    page = _signed_in(world.admin).get(reverse("whatif-detail", args=[whatif.pk]))
    assert 'http-equiv="refresh"' in page.content.decode()
    assert 'data-width="55"' in page.content.decode()


@pytest.mark.django_db
def test_a_department_lead_sees_only_her_runs_and_her_departments_teams(
    window: World, dora: User, django_capture_on_commit_callbacks: Capture
) -> None:
    ops = Team.objects.create(slug="ops", name="Ops")
    Quota.objects.create(team=ops, gpu_type=window.h100, guaranteed=0, limit=8)
    ops_queue = Queue.objects.create(team=ops, name="normal", priority=100)
    _job(window.admin, ops_queue, window.h100, 8, T0)
    _ask(_signed_in(window.admin), django_capture_on_commit_callbacks)
    _ask(_signed_in(dora), django_capture_on_commit_callbacks)
    admins, doras = WhatIf.objects.order_by("pk")
    lead = _signed_in(dora)
    listing = lead.get(reverse("whatif-list")).content.decode()
    assert reverse("whatif-detail", args=[doras.pk]) in listing
    assert reverse("whatif-detail", args=[admins.pk]) not in listing
    assert lead.get(reverse("whatif-detail", args=[admins.pk])).status_code == 404
    own = lead.get(reverse("whatif-detail", args=[doras.pk])).content.decode()
    assert 'data-name="vision"' in own and 'data-name="ops"' not in own
    assert "ops" in doras.results["teams"]  # replayed, just not hers to see
    admin_page = _signed_in(window.admin).get(reverse("whatif-detail", args=[doras.pk]))
    assert 'data-name="ops"' in admin_page.content.decode()
    for outsider in (window.alice, window.carol):
        response = _signed_in(outsider).get(reverse("whatif-detail", args=[doras.pk]))
        assert response.status_code == 404
