"""Team budgets: the leads are told once at each threshold a month, a spent budget with a hard
stop holds the team's new jobs (with the figures) until it is raised, and `/api/v1/budgets/`
shows each caller their teams' budgets and refuses bad input, changing nothing.

H100 GPU-hours cost 2.5 (tests/conftest.py): a GPU for 4 h is 10.00."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from audit.models import AuditEvent
from billing.actions import set_budget
from billing.budgets import HOLDS_EVERY_S, budget_holds, evaluate_budgets
from billing.models import Budget, BudgetAlert
from cluster import lease
from cluster.apply import apply_decisions
from cluster.models import Node
from cluster.snapshot import build_snapshot
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from notifications.models import Notification
from scheduler import PolicyConfig, ReasonCode, schedule
from tenants.models import Membership, Role
from tests.billing.conftest import FakeClock, ran, start
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db
OnCommit = Callable[..., AbstractContextManager[Any]]


def _at(day: int, hour: int = 0, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def _spend(world: World, clock: FakeClock, hours: int, day: int = 2, month: int = 11) -> None:
    """vision spends `hours` × 2.5 (one H100 from midnight of `day` on)."""
    begin = _at(day, 0, month)
    ran(world.vision, world.bob, clock, begin, begin + timedelta(hours=hours))


def _told(user: Any) -> list[tuple[str, str]]:
    rows = Notification.objects.filter(user=user).order_by("id")
    return list(rows.values_list("level", "title"))


# -- thresholds -------------------------------------------------------------------------------


def test_the_leads_are_told_once_at_each_threshold(world: World, clock: FakeClock) -> None:
    set_budget(world.vision, amount=Decimal(100), acting_user=world.admin)
    _spend(world, clock, 30)  # 75.00: below the warning
    assert evaluate_budgets() == 0
    _spend(world, clock, 4, day=3)  # 85.00
    assert evaluate_budgets() == 1
    assert evaluate_budgets() == 0  # again: nothing new
    assert [level for level, _ in _told(world.alice)] == ["warning"]
    assert "85%" in _told(world.alice)[0][1]
    _spend(world, clock, 6, day=4)  # 100.00
    assert evaluate_budgets() == 1
    assert evaluate_budgets() == 0
    assert [level for level, _ in _told(world.alice)] == ["warning", "critical"]
    assert _told(world.bob) == [] and _told(world.carol) == []  # leads only
    stored = BudgetAlert.objects.for_team(world.vision).values_list("level", "spent")
    assert sorted(stored) == [("critical", Decimal("100.00")), ("warning", Decimal("85.00"))]


def test_a_team_jumping_past_both_thresholds_is_told_the_higher_only(
    world: World, clock: FakeClock
) -> None:
    set_budget(world.vision, amount=Decimal(10), hard_stop=True, acting_user=world.admin)
    _spend(world, clock, 8)  # 20.00
    evaluate_budgets()
    ((level, title),) = _told(world.alice)
    assert level == "critical" and "200%" in title
    body = Notification.objects.get(user=world.alice).body
    assert "20.00 of 10.00 CNY spent" in body and "new jobs wait" in body
    assert evaluate_budgets() == 0  # the warning is recorded as passed too


def test_a_new_month_tells_them_again(world: World, clock: FakeClock) -> None:
    set_budget(world.vision, amount=Decimal(100), acting_user=world.admin)
    _spend(world, clock, 34)  # 85.00 in November
    evaluate_budgets()
    Notification.objects.filter(user=world.alice).update(read=True)
    clock.set(_at(1, 1, month=12))
    assert evaluate_budgets() == 0  # December has spent nothing yet
    _spend(world, clock, 34, month=12)
    assert evaluate_budgets() == 1
    assert [level for level, _ in _told(world.alice)] == ["warning", "warning"]
    months = BudgetAlert.objects.for_team(world.vision).values_list("month", flat=True)
    assert sorted(m.month for m in months) == [11, 12]


# -- the hard stop ----------------------------------------------------------------------------


def _cycle(now: datetime) -> None:
    """One scheduling cycle as the controller runs it: snapshot, decide, write."""
    assert lease.try_acquire("test-controller")
    decisions = schedule(build_snapshot(now, {}), PolicyConfig())
    apply_decisions(decisions, now, holder="test-controller")


def _submit(world: World, team: Any, owner: Any) -> Job:
    return submit_job(team, parse_spec(spec(team=team.slug)), acting_user=owner)


def test_a_spent_budget_with_a_hard_stop_holds_new_jobs_until_it_is_raised(
    world: World, clock: FakeClock, django_capture_on_commit_callbacks: OnCommit
) -> None:
    Node.objects.create(name="node-1", gpu_type=world.h100, gpu_allocatable=8, ready=True)
    set_budget(world.vision, amount=Decimal(10), hard_stop=True, acting_user=world.admin)
    _spend(world, clock, 5)  # 12.50 of 10.00
    running = _submit(world, world.vision, world.bob)
    start(running, clock, running_after=0)  # admitted before the controller held the team
    waiting = _submit(world, world.vision, world.bob)
    other = _submit(world, world.nlp, world.carol)

    _cycle(clock.now)
    waiting.refresh_from_db()
    assert waiting.state == State.QUEUED
    assert waiting.pending_code == ReasonCode.BUDGET_EXHAUSTED
    assert waiting.pending_figures is not None
    assert {k: waiting.pending_figures[k] for k in ("spent", "budget", "currency")} == {
        "spent": "12.50",
        "budget": "10.00",
        "currency": "CNY",
    }
    assert waiting.estimated_start is None
    running.refresh_from_db()
    other.refresh_from_db()
    assert (running.state, other.state) == (State.RUNNING, State.ADMITTED)

    with django_capture_on_commit_callbacks(execute=True):
        set_budget(world.vision, amount=Decimal(50), hard_stop=True, acting_user=world.admin)
    _cycle(clock.now)
    waiting.refresh_from_db()
    assert waiting.state == State.ADMITTED


def test_without_a_hard_stop_a_spent_budget_holds_nothing(world: World, clock: FakeClock) -> None:
    set_budget(world.vision, amount=Decimal(10), acting_user=world.admin)
    _spend(world, clock, 5)
    assert budget_holds(clock.now) == {}


def test_the_hold_is_worked_out_afresh_at_most_every_period(
    world: World, clock: FakeClock, django_assert_num_queries: Callable[..., Any]
) -> None:
    set_budget(world.vision, amount=Decimal(10), hard_stop=True, acting_user=world.admin)
    read_at = clock.now
    assert budget_holds(read_at) == {}
    _spend(world, clock, 5, day=2)  # 12.50: spent after the figures were read
    with django_assert_num_queries(0):
        assert budget_holds(read_at + timedelta(seconds=HOLDS_EVERY_S - 1)) == {}
    held = budget_holds(read_at + timedelta(seconds=HOLDS_EVERY_S))
    assert held == {"vision": {"spent": "12.50", "budget": "10.00", "currency": "CNY"}}


# -- the API ----------------------------------------------------------------------------------


def _post(user: Any, **body: Any) -> Any:
    return api_as(user).post("/api/v1/budgets/", {"team": "vision", **body}, format="json")


def test_an_admin_sets_a_budget_audited_and_the_team_sees_it_with_its_spending(
    world: World, clock: FakeClock, django_assert_max_num_queries: Callable[..., Any]
) -> None:
    _spend(world, clock, 4)  # 10.00
    response = _post(world.admin, amount="40", hard_stop=True)
    assert response.status_code == 201, response.content
    event = AuditEvent.chain.filter(action="billing.budget_set").get()
    assert event.team_id == world.vision.pk
    assert event.after == {
        "amount": "40.00",
        "warning_pct": 80,
        "critical_pct": 100,
        "hard_stop": True,
    }
    for user in (world.alice, world.bob):  # the lead, and a researcher of the team
        with django_assert_max_num_queries(8):
            (row,) = api_as(user).get("/api/v1/budgets/").json()
        assert (row["team"], row["amount"], row["spent"], row["percent"]) == (
            "vision",
            "40.00",
            "10.00",
            25,
        )
        assert (row["currency"], row["warning_pct"], row["critical_pct"]) == ("CNY", 80, 100)
        assert row["hard_stop"] is True and row["held"] is False
    assert api_as(world.carol).get("/api/v1/budgets/").json() == []
    assert api_as(world.carol).get("/api/v1/budgets/vision/").status_code == 404
    assert api_as(world.alice).get("/api/v1/budgets/vision/").json()["spent"] == "10.00"


def test_only_admins_and_the_departments_leads_set_a_teams_budget(world: World) -> None:
    assert _post(world.alice, amount="40").status_code == 403  # the team's own lead
    assert _post(world.bob, amount="40").status_code == 403
    assert _post(world.carol, amount="40").status_code == 404  # another team's: not found
    assert not Budget.objects.for_team(world.vision).exists()
    Membership.objects.create(team=world.research, user=world.carol, role=Role.LEAD)
    assert _post(world.carol, amount="40").status_code == 201  # now the department's lead


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"amount": "0"}, "amount", "0.01"),
        ({"amount": "-5"}, "amount", "0.01"),
        ({"amount": "1.001"}, "amount", "2 decimal places"),
        ({"amount": "10", "warning_pct": 0}, "warning_pct", "1 to 99"),
        ({"amount": "10", "warning_pct": 100}, "warning_pct", "1 to 99"),
        ({"amount": "10", "warning_pct": 90, "critical_pct": 90}, "critical_pct", "(90)"),
        ({"amount": "10", "critical_pct": 101}, "critical_pct", "at most 100"),
        ({"amount": "ten"}, "amount", "number"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_the_limit_and_changes_nothing(
    world: World, body: dict[str, Any], field: str, words: str
) -> None:
    set_budget(world.vision, amount=Decimal(100), acting_user=world.admin)
    before = list(Budget.objects.for_team(world.vision).values())
    audited = AuditEvent.chain.count()
    for response in (
        _post(world.admin, **body),
        api_as(world.admin).patch("/api/v1/budgets/vision/", body, format="json"),
    ):
        assert response.status_code == 400, response.content
        assert words in str(response.json()[field])
    assert list(Budget.objects.for_team(world.vision).values()) == before
    assert AuditEvent.chain.count() == audited


def test_a_patch_changes_only_what_it_names_and_delete_takes_the_budget_away(
    world: World,
) -> None:
    set_budget(world.vision, amount=Decimal(100), warning_pct=70, acting_user=world.admin)
    admin = api_as(world.admin)
    response = admin.patch("/api/v1/budgets/vision/", {"hard_stop": True}, format="json")
    assert response.status_code == 200, response.content
    budget = Budget.objects.for_team(world.vision).get()
    assert (budget.amount, budget.warning_pct, budget.hard_stop) == (Decimal(100), 70, True)
    assert api_as(world.alice).delete("/api/v1/budgets/vision/").status_code == 403
    assert admin.delete("/api/v1/budgets/vision/").status_code == 204
    assert not Budget.objects.for_team(world.vision).exists()
    assert admin.get("/api/v1/budgets/vision/").status_code == 404


# -- the pages --------------------------------------------------------------------------------


def test_the_team_and_usage_pages_show_the_budget_to_the_team_only(
    world: World, clock: FakeClock
) -> None:
    set_budget(world.vision, amount=Decimal(40), hard_stop=True, acting_user=world.admin)
    _spend(world, clock, 4)
    bob, carol = Client(), Client()
    bob.force_login(world.bob)
    carol.force_login(world.carol)
    team_page = bob.get("/teams/vision/").content.decode()
    assert "10.00 of 40.00 CNY spent (25 %)" in team_page
    assert "new jobs wait" in team_page
    usage_page = bob.get("/usage/").content.decode()
    assert "Budgets this month" in usage_page and "40.00" in usage_page
    assert "Budgets this month" not in carol.get("/usage/").content.decode()
