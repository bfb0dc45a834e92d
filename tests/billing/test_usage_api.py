"""`/api/v1/usage/` and `/api/v1/prices/`: exact cost with a price change mid-month and queue
multipliers; who sees what; bad input refused naming the parameter."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from audit.models import AuditEvent
from billing.actions import set_gpu_price, set_queue_multiplier
from billing.api import UsageSerializer, usage_body
from billing.models import GpuPrice
from billing.usage import month_period, usage_report
from jobs.models import State
from quotas.models import Queue
from tests.billing.conftest import FakeClock, ran
from tests.conftest import World, api_as

pytestmark = pytest.mark.django_db


def _at(day: int, hour: int = 0, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def _usage(user: Any, **params: str) -> dict[str, Any]:
    response = api_as(user).get("/api/v1/usage/", params)
    assert response.status_code == 200, response.content
    return dict(response.json())


@pytest.fixture
def november(world: World, clock: FakeClock) -> World:
    """bob: 2 GPUs for a day across the price change (16 Nov: 2.5 → 4.0 per GPU-hour);
    alice: 1 GPU for 10 h in the low queue (× 0.5); bob: 4 GPUs for 1 h lost with its node
    (credited); carol (nlp): 1 GPU for 3 h; and an October job that ran into November 2 h."""
    set_gpu_price(world.h100, date(2026, 11, 16), Decimal("4.0"), acting_user=world.admin)
    low = Queue.objects.for_team(world.vision).get(name="low")
    set_queue_multiplier(low, Decimal("0.5"), acting_user=world.admin)
    ran(world.vision, world.bob, clock, _at(15, 12), _at(16, 12), gpus=2)
    ran(world.vision, world.alice, clock, _at(20, 8), _at(20, 18), queue="low")
    ran(
        world.vision,
        world.bob,
        clock,
        _at(21, 8),
        _at(21, 9),
        gpus=4,
        ends_in=State.NODE_FAILED,
        reason="pod lost with node node-1 (NodeLost)",
    )
    ran(world.nlp, world.carol, clock, _at(22, 1), _at(22, 4))
    ran(world.vision, world.bob, clock, _at(31, 22, month=10), _at(1, 2))
    clock.set(_at(30, 12))
    return world


def _rows(body: dict[str, Any], *fields: str) -> list[tuple[str, ...]]:
    return [tuple(row[f] for f in fields) for row in body["rows"]]


def test_a_price_change_mid_month_splits_the_cost_at_the_change(november: World) -> None:
    body = _usage(november.admin, period="2026-11", group_by="team,user")
    assert body["currency"] == "CNY"
    assert body["period"] == {"from": "2026-11-01", "to": "2026-11-30"}
    assert _rows(body, "team", "user", "gpu_hours", "cost", "credited_gpu_hours") == [
        ("nlp", "carol", "3.0000", "12.00", "0.0000"),  # 3 h × 4.0
        # 12 h × 2 GPUs at 2.5, 12 h × 2 GPUs at 4.0, and 2 h of the October job at 2.5
        ("vision", "alice", "10.0000", "20.00", "0.0000"),  # 10 h × 4.0 × 0.5
        ("vision", "bob", "50.0000", "161.00", "4.0000"),
    ]
    bob = body["rows"][2]
    assert (bob["gpu_seconds"], bob["credited_cost"]) == ("180000.000", "16.00")


def test_usage_by_day_splits_at_midnight(november: World) -> None:
    body = _usage(november.admin, **{"from": "2026-11-15", "to": "2026-11-16"}, group_by="day")
    assert _rows(body, "day", "gpu_hours", "cost") == [
        ("2026-11-15", "24.0000", "60.00"),
        ("2026-11-16", "24.0000", "96.00"),
    ]


def test_a_lead_sees_the_team_by_member_and_not_another_team(november: World) -> None:
    body = _usage(november.alice, period="2026-11", group_by="user")
    assert _rows(body, "user") == [("alice",), ("bob",)]
    assert [t["team"] for t in body["team_totals"]] == ["vision"]
    response = api_as(november.alice).get("/api/v1/usage/", {"team": "nlp"})
    assert response.status_code == 404


def test_a_member_sees_own_jobs_and_the_teams_total(november: World) -> None:
    body = _usage(november.bob, period="2026-11", group_by="user,queue")
    assert _rows(body, "user", "queue") == [("bob", "normal")]
    [total] = body["team_totals"]
    assert (total["team"], total["gpu_hours"], total["cost"]) == ("vision", "60.0000", "181.00")


def test_an_outsider_sees_nothing_of_another_team(november: World) -> None:
    body = _usage(november.carol, period="2026-11", group_by="team,user,gpu_type,queue")
    assert _rows(body, "team", "user") == [("nlp", "carol")]
    assert [t["team"] for t in body["team_totals"]] == ["nlp"]
    assert api_as(november.carol).get("/api/v1/usage/", {"team": "vision"}).status_code == 404


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"period": "2026-13"}, "period"),
        ({"period": "2026-11", "from": "2026-11-01", "to": "2026-11-02"}, "period"),
        ({"from": "2026-11-01"}, "to"),
        ({"from": "2026-11-05", "to": "2026-11-01"}, "to"),
        ({"from": "2025-01-01", "to": "2026-11-01"}, "to"),
        ({"from": "yesterday", "to": "2026-11-01"}, "from"),
        ({"group_by": "team,colour"}, "group_by"),
        ({"group_by": "team,team"}, "group_by"),
    ],
)
def test_bad_usage_queries_are_refused_naming_the_parameter(
    world: World, params: dict[str, str], field: str
) -> None:
    response = api_as(world.bob).get("/api/v1/usage/", params)
    assert response.status_code == 400
    assert list(response.json()) == [field]


@pytest.mark.parametrize("group_by", ["team", "team,gpu_type,queue,user", "job", "day,team"])
def test_the_answer_is_what_the_documented_serializer_gives(november: World, group_by: str) -> None:
    """The view returns `usage_body` without serializing it again: the two must agree."""
    body = _usage(november.admin, period="2026-11", group_by=group_by)
    period = month_period("2026-11")
    report = usage_report(november.admin, period, group_by.split(","), now=_at(30, 12))
    assert body["rows"], "nothing to compare"
    assert body == json.loads(json.dumps(UsageSerializer(usage_body(report)).data))


def test_anonymous_callers_get_no_usage(world: World) -> None:
    assert api_as(None).get("/api/v1/usage/").status_code in (401, 403)
    assert api_as(None).get("/api/v1/prices/").status_code in (401, 403)


def test_an_admin_sets_a_price_from_a_day_on_audited_and_kept_in_the_history(
    world: World,
) -> None:
    admin = api_as(world.admin)
    for day, price in (("2026-11-01", "3.0"), ("2026-12-01", "3.5")):
        body = {"gpu_type": "h100-80g", "effective_from": day, "price_per_gpu_hour": price}
        assert admin.post("/api/v1/prices/", body, format="json").status_code == 201
    book = admin.get("/api/v1/prices/").json()
    assert [(p["effective_from"], p["price_per_gpu_hour"]) for p in book["gpu_prices"]] == [
        ("2026-11-01", "3.0000"),
        ("2026-12-01", "3.5000"),
    ]
    assert {p["gpu_type"]: p["price_per_gpu_hour"] for p in book["base_prices"]} == {
        "a100-80g": "0.0000",
        "h100-80g": "2.5000",
    }
    audited = AuditEvent.chain.filter(action="billing.price_set").order_by("seq")
    assert [(e.after or {}).get("effective_from") for e in audited] == [
        "2026-11-01",
        "2026-12-01",
    ]


def test_only_an_admin_changes_prices_and_a_bad_price_changes_nothing(world: World) -> None:
    body = {"gpu_type": "h100-80g", "effective_from": "2026-11-01", "price_per_gpu_hour": "3"}
    assert api_as(world.alice).post("/api/v1/prices/", body, format="json").status_code == 403
    negative = {**body, "price_per_gpu_hour": "-1"}
    response = api_as(world.admin).post("/api/v1/prices/", negative, format="json")
    assert response.status_code == 400 and list(response.json()) == ["price_per_gpu_hour"]
    unknown = {**body, "gpu_type": "tpu-v5"}
    response = api_as(world.admin).post("/api/v1/prices/", unknown, format="json")
    assert response.status_code == 400 and list(response.json()) == ["gpu_type"]
    assert not GpuPrice.objects.exists()
    assert not AuditEvent.chain.filter(action="billing.price_set").exists()


def test_queue_multipliers_are_shown_to_their_team_only(november: World) -> None:
    seen = api_as(november.carol).get("/api/v1/prices/").json()["queue_multipliers"]
    assert seen == []
    seen = api_as(november.bob).get("/api/v1/prices/").json()["queue_multipliers"]
    assert seen == [{"team": "vision", "queue": "low", "multiplier": "0.500"}]


def test_the_schema_documents_usage_and_prices(world: World) -> None:
    paths = api_as(None).get("/api/schema/", {"format": "json"}).json()["paths"]
    assert {"/api/v1/usage/", "/api/v1/prices/"} <= set(paths)
    assert "post" in paths["/api/v1/prices/"]


def test_the_usage_page_shows_each_role_its_view(november: World) -> None:
    from django.test import Client

    def page(user: Any, **params: str) -> str:
        client = Client()
        client.force_login(user)
        response = client.get("/usage/", {"period": "2026-11", **params})
        assert response.status_code == 200
        return response.content.decode()

    admin = page(november.admin)
    assert "<td>vision</td>" in admin and "<td>nlp</td>" in admin and "181.00" in admin
    lead = page(november.alice)
    assert "<td>bob</td>" in lead and "<td>alice</td>" in lead and "<td>nlp</td>" not in lead
    member = page(november.bob)
    assert "<td>alice</td>" not in member and "161.00" in member  # own jobs, by job
    assert "<td>vision</td><td>60.0000</td><td>181.00</td>" in member  # the team's total
    outsider = page(november.carol)
    assert "vision" not in outsider.split("<h1>")[1]
    assert "must be a month" in page(november.bob, period="November")


def test_an_admin_sets_a_queue_multiplier_audited(world: World) -> None:
    body = {"team": "vision", "queue": "low", "multiplier": "0.4"}
    assert (
        api_as(world.alice).post("/api/v1/prices/queues/", body, format="json").status_code == 403
    )
    response = api_as(world.admin).post("/api/v1/prices/queues/", body, format="json")
    assert response.status_code == 200, response.content
    seen = api_as(world.bob).get("/api/v1/prices/").json()["queue_multipliers"]
    assert seen == [{"team": "vision", "queue": "low", "multiplier": "0.400"}]
    [event] = AuditEvent.chain.filter(action="billing.queue_multiplier_set")
    assert event.team_id == world.vision.pk
    unknown = {**body, "queue": "urgent"}
    response = api_as(world.admin).post("/api/v1/prices/queues/", unknown, format="json")
    assert response.status_code == 400 and list(response.json()) == ["queue"]
