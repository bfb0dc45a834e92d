"""A department's statement: the sum of its teams' to the cent (each rounded as its own is),
a line per team, a live draft until the month's end, then final and never changed; seen by
the department's leads and platform admins only."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from billing.actions import adjust_statement
from billing.models import Statement
from billing.statements import finalise_last_month
from tenants.models import Membership, Role, Team
from tests.billing.conftest import FakeClock, ran
from tests.conftest import World, api_as

pytestmark = pytest.mark.django_db


def _at(month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC)


@pytest.fixture
def department(world: World, clock: FakeClock) -> World:
    """In November at 2.5 a GPU-hour: bob (vision) 1 GPU for 1 h 0 m 19 s (2.5132) and
    3 GPUs for 2 h (15), carol (nlp) 1 GPU for 1 h 0 m 19 s (2.5132). Unrounded, the sum
    would be 20.03; the teams' statements say 17.51 and 2.51, so their department's says
    20.02. dora leads the department (research); now 2 December."""
    ran(world.vision, world.bob, clock, _at(11, 3, 8), _at(11, 3, 9, 0, 19))
    ran(world.vision, world.bob, clock, _at(11, 4, 8), _at(11, 4, 10), gpus=3)
    ran(world.nlp, world.carol, clock, _at(11, 5, 8), _at(11, 5, 9, 0, 19))
    dora = User.objects.create_user("dora")
    Membership.objects.create(team=world.research, user=dora, role=Role.LEAD)
    clock.set(_at(12, 2, 1))
    return world


def _statements(user: Any, **params: str) -> dict[str, dict[str, Any]]:
    response = api_as(user).get("/api/v1/statements/", {"period": "2026-11", **params})
    assert response.status_code == 200, response.content
    return {s["team"]: s for s in response.json()}


def _dora(world: World) -> Any:
    return Membership.objects.for_team(world.research).get(role=Role.LEAD).user


def test_a_departments_statement_is_its_teams_summed_to_the_cent(department: World) -> None:
    shown = _statements(_dora(department))
    assert list(shown) == ["nlp", "research", "vision"]
    research, vision, nlp = shown["research"], shown["vision"], shown["nlp"]
    assert (vision["figures"]["cost"], nlp["figures"]["cost"]) == ("17.51", "2.51")
    assert research["department"] and not vision["department"]
    assert (research["final"], research["figures"]["cost"], research["due"]) == (
        False,
        "20.02",
        "20.02",
    )
    assert research["figures"]["gpu_hours"] == "8.0106"
    assert [(line["team"], line["cost"]) for line in research["lines"]] == [
        ("nlp", "2.51"),
        ("vision", "17.51"),
    ]


def test_a_final_departments_statement_never_changes(department: World) -> None:
    draft = _statements(department.admin)["research"]
    assert finalise_last_month() == 3  # vision, nlp, and their department
    final = _statements(department.admin)["research"]
    assert final["final"] and final["figures"] == draft["figures"]
    assert final["lines"] == draft["lines"]
    # Later: nlp leaves the department, and a new team joins it with November usage.
    department.nlp.parent = None
    department.nlp.save()
    newcomer = Team.objects.create(slug="robotics", name="Robotics", parent=department.research)
    Statement.objects.create(
        team=newcomer,
        month=final["month"],
        currency="CNY",
        gpu_seconds=Decimal(3600),
        cost=Decimal("9.99"),
        credited_gpu_seconds=Decimal(0),
        credited_cost=Decimal(0),
        finalised_at=_at(12, 1),
    )
    assert finalise_last_month() == 0
    again = _statements(department.admin)["research"]
    assert (again["figures"], again["lines"]) == (final["figures"], final["lines"])
    assert Statement.objects.for_team(department.research).count() == 1


def test_an_adjustment_of_a_team_moves_its_departments_due(department: World) -> None:
    finalise_last_month()
    vision = Statement.objects.for_team(department.vision).get()
    adjust_statement(vision, Decimal("-1.50"), "GPU 3 slow", acting_user=department.admin)
    shown = _statements(department.admin)
    assert shown["vision"]["due"] == "16.01"
    research = shown["research"]
    assert (research["figures"]["cost"], research["due"]) == ("20.02", "18.52")
    assert [(a["amount"], a["reason"]) for a in research["adjustments"]] == [
        ("-1.50", "GPU 3 slow")
    ]


def test_the_department_is_for_its_leads_and_admins_only(department: World) -> None:
    assert "research" in _statements(department.admin)
    assert list(_statements(_dora(department), team="research")) == ["research"]
    assert list(_statements(department.alice)) == ["vision"]  # a sub-team's lead
    for user in (department.alice, department.bob, department.carol):
        response = api_as(user).get("/api/v1/statements/", {"team": "research"})
        assert response.status_code == 404
    outsider = User.objects.create_user("erin")
    Membership.objects.create(
        team=Team.objects.create(slug="other", name="Other"), user=outsider, role=Role.LEAD
    )
    assert api_as(outsider).get("/api/v1/statements/", {"team": "research"}).status_code == 404
    assert "research" not in _statements(outsider)


def _get(user: Any, path: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(path, {"period": "2026-11"})
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_and_the_csv_show_the_department(department: World) -> None:
    finalise_last_month()
    dora = _dora(department)
    page = _get(dora, "/usage/statements/")
    assert "(research)" in page and "20.02 CNY" in page
    assert "(research)" not in _get(department.alice, "/usage/statements/")
    rows = _get(dora, "/usage/statements.csv").splitlines()
    department_rows = [row for row in rows if row.startswith("research,")]
    assert department_rows == [
        "research,2026-11,final,CNY,team,nlp,,,1.0053,2.51,0.0000,0.00",
        "research,2026-11,final,CNY,team,vision,,,7.0053,17.51,0.0000,0.00",
        "research,2026-11,final,CNY,due,,,,,20.02",
    ]
    assert not any(
        r.startswith("research,")
        for r in _get(department.alice, "/usage/statements.csv").splitlines()
    )
