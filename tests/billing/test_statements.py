"""Monthly statements: a live draft until the month is finalised, then final and never
changed; a correction is an adjustment, by an admin, audited."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from audit.models import AuditEvent
from billing.models import Adjustment, GpuPrice, Statement
from billing.statements import finalise_last_month
from billing.tasks import finalise_statements
from tests.billing.conftest import FakeClock, ran
from tests.conftest import World, api_as

pytestmark = pytest.mark.django_db


def _at(month: int, day: int, hour: int = 0) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


@pytest.fixture
def used(world: World, clock: FakeClock) -> World:
    """bob: 2 GPUs for 10 h in November at 2.5; carol (nlp) 1 GPU for 4 h; now 2 December."""
    ran(world.vision, world.bob, clock, _at(11, 10, 8), _at(11, 10, 18), gpus=2)
    ran(world.nlp, world.carol, clock, _at(11, 12, 8), _at(11, 12, 12))
    clock.set(_at(12, 2, 1))
    return world


def _statements(user: Any, **params: str) -> list[dict[str, Any]]:
    response = api_as(user).get("/api/v1/statements/", {"period": "2026-11", **params})
    assert response.status_code == 200, response.content
    return list(response.json())


def test_a_month_is_a_draft_until_finalised_then_final_once(used: World) -> None:
    [draft] = _statements(used.alice)
    assert (draft["team"], draft["final"], draft["due"]) == ("vision", False, "50.00")
    assert (
        finalise_statements.apply().get() == 3
    )  # vision, nlp and their department research, in this process
    assert finalise_last_month() == 0  # again: nothing more
    [final] = _statements(used.alice)
    assert (final["final"], final["due"], final["figures"]["gpu_hours"]) == (
        True,
        "50.00",
        "20.0000",
    )
    assert final["lines"] == [
        {
            "user": "bob",
            "gpu_type": "h100-80g",
            "queue": "normal",
            "gpu_seconds": "72000.000",
            "gpu_hours": "20.0000",
            "cost": "50.00",
            "credited_gpu_seconds": "0.000",
            "credited_gpu_hours": "0.0000",
            "credited_cost": "0.00",
        }
    ]


def test_a_final_statement_refuses_a_backdated_price_and_nothing_is_written(used: World) -> None:
    finalise_last_month()
    body = {"gpu_type": "h100-80g", "effective_from": "2026-11-20", "price_per_gpu_hour": "9"}
    response = api_as(used.admin).post("/api/v1/prices/", body, format="json")
    assert response.status_code == 400
    assert "2026-11" in response.json()["effective_from"][0]
    assert not GpuPrice.objects.exists()
    assert not AuditEvent.chain.filter(action="billing.price_set").exists()
    later = {**body, "effective_from": "2026-12-01"}
    assert api_as(used.admin).post("/api/v1/prices/", later, format="json").status_code == 201
    assert _statements(used.alice)[0]["due"] == "50.00"


def test_an_admins_adjustment_corrects_a_final_statement_and_is_audited(used: World) -> None:
    finalise_last_month()
    body = {"team": "vision", "period": "2026-11", "amount": "-12.50", "reason": "GPU 3 slow"}
    response = api_as(used.admin).post("/api/v1/statements/adjustments/", body, format="json")
    assert response.status_code == 201, response.content
    [statement] = _statements(used.alice)
    assert statement["due"] == "37.50"
    assert statement["figures"]["cost"] == "50.00"  # the statement itself never changes
    assert [(a["amount"], a["reason"], a["actor"]) for a in statement["adjustments"]] == [
        ("-12.50", "GPU 3 slow", "admin")
    ]
    [event] = AuditEvent.chain.filter(action="billing.adjustment")
    assert event.team_id == used.vision.pk and (event.after or {})["amount"] == "-12.50"


@pytest.mark.parametrize(
    ("who", "body", "status", "field"),
    [
        ("alice", {}, 403, None),  # a lead does not adjust
        ("admin", {"period": "2026-12"}, 400, "period"),  # a draft
        ("admin", {"reason": " "}, 400, "reason"),
        ("admin", {"amount": "0"}, 400, "amount"),
        ("admin", {"amount": "lots"}, 400, "amount"),
    ],
)
def test_bad_adjustments_are_refused_and_nothing_is_written(
    used: World, who: str, body: dict[str, str], status: int, field: str | None
) -> None:
    finalise_last_month()
    given = {"team": "vision", "period": "2026-11", "amount": "5", "reason": "fix", **body}
    user = getattr(used, who)
    response = api_as(user).post("/api/v1/statements/adjustments/", given, format="json")
    assert response.status_code == status
    if field:
        assert list(response.json()) == [field]
    assert not Adjustment.objects.for_user(used.admin).exists()
    assert not AuditEvent.chain.filter(action="billing.adjustment").exists()


def test_statements_are_for_leads_and_admins_of_their_teams_only(used: World) -> None:
    finalise_last_month()
    assert [s["team"] for s in _statements(used.admin)] == ["nlp", "research", "vision"]
    assert _statements(used.bob) == []  # a member: the usage page has the team's total
    assert _statements(used.carol) == []
    assert api_as(used.carol).get("/api/v1/statements/", {"team": "vision"}).status_code == 404
    assert Statement.objects.for_user(used.admin).count() == 3  # with the department


def _page(user: Any, path: str) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    response = client.get(path, {"period": "2026-11"})
    assert response.status_code == 200
    return response.content.decode()


def test_the_statements_page_and_its_csv_show_a_leads_team(used: World) -> None:
    finalise_last_month()
    page = _page(used.alice, "/usage/statements/")
    assert "(vision)" in page and "50.00 CNY" in page and "(nlp)" not in page
    assert "(vision)" not in _page(used.bob, "/usage/statements/")
    rows = _page(used.alice, "/usage/statements.csv").splitlines()
    assert rows[0].startswith("team,month,status,currency,row,user,gpu_type,queue,gpu_hours")
    assert rows[1:] == [
        "vision,2026-11,final,CNY,line,bob,h100-80g,normal,20.0000,50.00,0.0000,0.00",
        "vision,2026-11,final,CNY,due,,,,,50.00",
    ]
    assert _page(used.carol, "/usage/statements.csv").splitlines()[1:] == []
