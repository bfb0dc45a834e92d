"""Efficiency from scripted usage segments and minute roll-ups: exact GPU-hours allocated, used,
wasted and unmeasured, the wasted cost at the billed price, energy; who sees what; the
right-sizing hint's wording, in the table and on the job page; the idle policy form."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent
from billing.actions import set_queue_multiplier
from cluster.models import Gpu, Node
from jobs.models import Job
from monitoring.gpu_use import GpuUse, JobUse, right_sizing_hint
from monitoring.models import GpuMinute, IdlePolicy
from quotas.models import Queue
from tests.billing.conftest import FakeClock, ran
from tests.conftest import World, api_as

pytestmark = pytest.mark.django_db


def _at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def rollups(job: Job, gpus: list[Gpu], start: datetime, utils: list[float]) -> None:
    """Two minutes of roll-ups from `start` on GPU i at utils[i] %, 12 samples of 300 W each."""
    for minute in range(2):
        for gpu, util in zip(gpus, utils, strict=False):
            GpuMinute.objects.create(
                gpu=gpu,
                job=job,
                minute=int(start.timestamp()) + 60 * minute,
                samples=12,
                util_sum=util * 12,
                power_sum=300.0 * 12,
            )


@pytest.fixture
def scripted(world: World, clock: FakeClock) -> dict[str, Job]:
    """bob: 4 GPUs for 10 h at 80, 40, 0, 0 % (30 % on average), and 2 GPUs for 1 h without
    samples; alice: 1 GPU for 2 h in the low queue (× 0.5) at 50 %; carol (nlp): 1 GPU for 3 h
    at 10 %. h100 costs 2.5 per GPU-hour."""
    node = Node.objects.create(name="h100-a-1", gpu_type=world.h100, gpu_capacity=8, ready=True)
    gpus = [Gpu.objects.create(node=node, index=i) for i in range(8)]
    low = Queue.objects.for_team(world.vision).get(name="low")
    set_queue_multiplier(low, Decimal("0.5"), acting_user=world.admin)
    wide = ran(world.vision, world.bob, clock, _at(20, 8), _at(20, 18), gpus=4)
    rollups(wide, gpus[:4], _at(20, 9), [80, 40, 0, 0])
    blind = ran(world.vision, world.bob, clock, _at(21, 8), _at(21, 9), gpus=2)
    small = ran(world.vision, world.alice, clock, _at(22, 8), _at(22, 10), queue="low")
    rollups(small, gpus[4:5], _at(22, 9), [50])
    other = ran(world.nlp, world.carol, clock, _at(23, 1), _at(23, 4))
    rollups(other, gpus[5:6], _at(23, 2), [10])
    clock.set(_at(30, 12))
    return {"wide": wide, "blind": blind, "small": small, "other": other}


def _efficiency(user: Any, **params: str) -> dict[str, Any]:
    response = api_as(user).get("/api/v1/efficiency/", {"period": "2026-11", **params})
    assert response.status_code == 200, response.content
    return dict(response.json())


FIGURES = (
    "allocated_gpu_hours",
    "used_gpu_hours",
    "wasted_gpu_hours",
    "unmeasured_gpu_hours",
    "utilisation_pct",
    "wasted_cost",
)


def _figures(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[name] for name in FIGURES)


def test_lead_sees_the_team_by_member_exactly(world: World, scripted: dict[str, Job]) -> None:
    body = _efficiency(world.alice, group_by="user")
    rows = {row["user"]: row for row in body["rows"]}
    assert set(rows) == {"alice", "bob"}
    # bob: 40 GPU-h at 30 % → 12 used, 28 wasted (28 × 2.5 = 70); 2 GPU-h unmeasured.
    assert _figures(rows["bob"]) == ("42.0000", "12.0000", "28.0000", "2.0000", "30.0", "70.00")
    # alice: 2 GPU-h at 50 % in the low queue: 1 wasted at 2.5 × 0.5.
    assert _figures(rows["alice"]) == ("2.0000", "1.0000", "1.0000", "0.0000", "50.0", "1.25")
    # Energy: 300 W for 60 s per GPU-minute: bob 8 GPU-minutes, alice 2.
    assert rows["bob"]["energy_joules"] == 144000.0
    assert rows["alice"]["energy_joules"] == 36000.0
    assert body["total"]["wasted_cost"] == "71.25"
    assert body["total"]["energy_kwh"] == 0.05


def test_researcher_sees_own_jobs_with_the_hint(world: World, scripted: dict[str, Job]) -> None:
    body = _efficiency(world.bob)
    assert body["group_by"] == "job"
    rows = {row["job"]: row for row in body["rows"]}
    assert set(rows) == {scripted["wide"].pk, scripted["blind"].pk}
    wide, blind = rows[scripted["wide"].pk], rows[scripted["blind"].pk]
    assert wide["hint"] == "asked 4 GPUs, 2 were used above 5 %"
    assert wide["gpus"] == 4 and wide["user"] == "bob"
    assert blind["hint"] == "" and blind["utilisation_pct"] is None
    assert _figures(blind) == ("2.0000", "0.0000", "0.0000", "2.0000", None, "0.00")


def test_outsider_and_admin_see_their_own_scope(world: World, scripted: dict[str, Job]) -> None:
    carol = _efficiency(world.carol, group_by="team")
    assert [row["team"] for row in carol["rows"]] == ["nlp"]
    assert _figures(carol["rows"][0])[:3] == ("3.0000", "0.3000", "2.7000")
    admin = _efficiency(world.admin, group_by="team")
    assert [row["team"] for row in admin["rows"]] == ["nlp", "vision"]
    assert api_as(world.carol).get("/api/v1/efficiency/", {"team": "vision"}).status_code == 404


def test_the_hint_uses_the_teams_threshold(world: World, scripted: dict[str, Job]) -> None:
    IdlePolicy.objects.create(
        team=world.vision,
        util_pct=50,
        minutes=30,
        first_minutes=10,
        action="notify",
        stop_grace_minutes=0,
        updated_at=_at(1),
    )
    rows = {row["job"]: row for row in _efficiency(world.bob)["rows"]}
    assert rows[scripted["wide"].pk]["hint"] == "asked 4 GPUs, 1 was used above 50 %"


def test_hint_wording() -> None:
    def use(*utils: float) -> JobUse:
        return JobUse({i: GpuUse(10, u * 10, 0.0) for i, u in enumerate(utils)})

    assert right_sizing_hint(8, use(90, 30, 1, 0), 5) == "asked 8 GPUs, 2 were used above 5 %"
    assert right_sizing_hint(2, use(90, 5), 5) == "asked 2 GPUs, 1 was used above 5 %"
    assert right_sizing_hint(1, use(2), 5) == "asked 1 GPU, 0 were used above 5 %"
    assert right_sizing_hint(2, use(90, 6), 5) == ""
    assert right_sizing_hint(2, None, 5) == ""
    assert right_sizing_hint(2, JobUse(), 5) == ""


def test_job_page_shows_the_hint(world: World, scripted: dict[str, Job]) -> None:
    client = Client()
    client.force_login(world.bob)
    page = client.get(f"/jobs/{scripted['wide'].pk}/").content.decode()
    assert "asked 4 GPUs, 2 were used above 5 %" in page
    small = client.get(f"/jobs/{scripted['small'].pk}/").content.decode()
    assert "data-right-sizing" not in small


def test_the_page_shows_the_table_and_its_hint(world: World, scripted: dict[str, Job]) -> None:
    client = Client()
    client.force_login(world.bob)
    page = client.get("/usage/efficiency/?period=2026-11").content.decode()
    assert "asked 4 GPUs, 2 were used above 5 %" in page and "28.0000" in page
    assert "idle-policy" not in page  # bob leads no team
    lead = Client()
    lead.force_login(world.alice)
    page = lead.get("/usage/efficiency/?period=2026-11").content.decode()
    assert "<td>bob</td>" in page and "/usage/efficiency/idle-policy/vision/" in page


def test_efficiency_costs_the_same_queries_whatever_the_jobs(
    world: World, scripted: dict[str, Job], clock: FakeClock
) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            _efficiency(world.alice, group_by="job")
        return len(captured)

    few = queries()
    gpus = list(Gpu.objects.order_by("index"))
    for day in range(1, 11):
        job = ran(world.vision, world.bob, clock, _at(day, 1), _at(day, 2), gpus=2)
        rollups(job, gpus[:2], _at(day, 1), [90, 1])
    clock.set(_at(30, 12))
    assert len(_efficiency(world.alice, group_by="job")["rows"]) == 13
    assert queries() == few <= 12


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group_by": "day"}, "group_by"),
        ({"period": "2026-13"}, "period"),
        ({"from": "2026-11-01"}, "to"),
    ],
)
def test_bad_queries_are_refused_naming_the_parameter(
    world: World, params: dict[str, str], field: str
) -> None:
    response = api_as(world.alice).get("/api/v1/efficiency/", params)
    assert response.status_code == 400
    assert field in response.json()


def test_lead_sets_the_idle_policy_audited(world: World) -> None:
    lead = Client()
    lead.force_login(world.alice)
    form = {
        "util_pct": "10",
        "minutes": "60",
        "first_minutes": "15",
        "action": "stop",
        "stop_grace_minutes": "20",
    }
    response = lead.post("/usage/efficiency/idle-policy/vision/", form)
    assert response.status_code == 302
    policy = IdlePolicy.objects.for_team(world.vision).get()
    assert (policy.util_pct, policy.minutes, policy.action) == (10, 60, "stop")
    (event,) = AuditEvent.objects.for_user(world.admin).filter(action="team.idle_policy")
    assert event.actor_id == world.alice.pk
    assert event.after == {
        "util_pct": 10,
        "minutes": 60,
        "first_minutes": 15,
        "action": "stop",
        "stop_grace_minutes": 20,
    }


def test_bad_policy_is_refused_naming_the_field_and_changes_nothing(world: World) -> None:
    lead = Client()
    lead.force_login(world.alice)
    form = {
        "util_pct": "150",
        "minutes": "60",
        "first_minutes": "0",
        "action": "notify",
        "stop_grace_minutes": "0",
    }
    response = lead.post("/usage/efficiency/idle-policy/vision/", form)
    assert response.status_code == 400
    assert "util_pct: must be between 1 and 100, got 150" in response.content.decode()
    response = lead.post(
        "/usage/efficiency/idle-policy/vision/", {**form, "util_pct": "5", "action": "kill"}
    )
    assert (
        response.status_code == 400
        and "action: must be one of notify, stop" in response.content.decode()
    )
    assert not IdlePolicy.objects.for_team(world.vision).exists()


def test_a_member_cannot_set_the_policy(world: World) -> None:
    member = Client()
    member.force_login(world.bob)
    form = {"util_pct": "5", "minutes": "30", "first_minutes": "0", "action": "stop"}
    response = member.post(
        "/usage/efficiency/idle-policy/vision/", {**form, "stop_grace_minutes": "0"}
    )
    assert response.status_code == 403
    assert not IdlePolicy.objects.for_team(world.vision).exists()
