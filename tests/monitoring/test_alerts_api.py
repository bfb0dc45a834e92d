"""`/api/v1/alerts/` and `/api/v1/incidents/`: who sees which alerts, the filters, admins'
acknowledgement (audited, once), and the admins' incidents with their timelines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from audit.models import AuditEvent
from cluster.models import Node
from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from monitoring.models import Alert, AlertRule, Incident, IncidentEvent
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _job(world: World, owner: Any, team: str = "vision") -> Job:
    return submit_job(getattr(world, team), parse_spec(spec(team=team)), acting_user=owner)


def _alert(subject: str, *, state: str = "firing", level: str = "warning", **where: Any) -> Alert:
    rule = AlertRule.objects.get(name="GPU temperature")
    return Alert.objects.create(
        rule=rule,
        subject=subject,
        level=level,
        state=state,
        value=91 if level == "critical" else 84,
        started_at=T0,
        fired_at=None if state == "pending" else T0,
        **where,
    )


@pytest.fixture
def alerts(world: World) -> dict[str, Alert]:
    node = Node.objects.create(name="h100-a-1", gpu_type=world.h100, gpu_capacity=8, ready=True)
    bobs, alices = _job(world, world.bob), _job(world, world.alice)
    carols = _job(world, world.carol, team="nlp")
    return {
        "node": _alert("h100-a-1", level="critical", node=node),
        "bob": _alert("h100-a-1/gpu0", team=world.vision, job=bobs, node=node),
        "alice": _alert("h100-a-1/gpu1", team=world.vision, job=alices, node=node),
        "carol": _alert("h100-a-1/gpu2", team=world.nlp, job=carols, node=node),
        "resolved": _alert("h100-a-1/gpu3", state="resolved", team=world.vision, job=bobs),
        "pending": _alert("h100-a-1/gpu4", state="pending", team=world.vision, job=bobs),
    }


def _ids(user: Any, query: str = "") -> set[int]:
    response = api_as(user).get(f"/api/v1/alerts/{query}")
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def _pks(alerts: dict[str, Alert], *names: str) -> set[int]:
    return {alerts[name].pk for name in names}


def test_admins_see_all_leads_their_team_and_researchers_their_jobs(
    world: World, alerts: dict[str, Alert]
) -> None:
    assert _ids(world.admin) == _pks(alerts, "node", "bob", "alice", "carol")
    assert _ids(world.alice) == _pks(alerts, "bob", "alice")  # lead of vision
    assert _ids(world.bob) == _pks(alerts, "bob")  # a member: his own job's only
    assert _ids(world.carol) == _pks(alerts, "carol")
    assert api_as(None).get("/api/v1/alerts/").status_code == 401


def test_alerts_filter_by_state_and_level(world: World, alerts: dict[str, Alert]) -> None:
    assert _ids(world.admin, "?state=resolved") == _pks(alerts, "resolved")
    everything = _pks(alerts, "node", "bob", "alice", "carol", "resolved")
    assert _ids(world.admin, "?state=all") == everything  # a pending alert is nobody's news
    assert _ids(world.admin, "?level=critical") == _pks(alerts, "node")
    assert _ids(world.bob, "?state=all") == _pks(alerts, "bob", "resolved")
    row = api_as(world.bob).get("/api/v1/alerts/").json()["results"][0]
    assert row["rule"] == "GPU temperature" and row["metric"] == "DCGM_FI_DEV_GPU_TEMP"
    assert row["team"] == "vision" and row["node"] == "h100-a-1" and row["state"] == "firing"


@pytest.mark.parametrize(
    ("query", "field"), [("?state=pending", "state"), ("?level=info", "level")]
)
def test_a_bad_filter_is_refused_naming_the_field_and_the_choices(
    world: World, alerts: dict[str, Alert], query: str, field: str
) -> None:
    response = api_as(world.admin).get(f"/api/v1/alerts/{query}")
    assert response.status_code == 400
    assert list(response.json()) == [field] and "must be one of" in response.json()[field][0]


def test_the_alert_list_costs_a_fixed_number_of_queries(
    world: World, alerts: dict[str, Alert], django_assert_max_num_queries: Any
) -> None:
    for index in range(20):
        _alert(f"h100-a-1/gpu{10 + index}", team=world.vision, job=alerts["bob"].job)
    with django_assert_max_num_queries(4):
        response = api_as(world.admin).get("/api/v1/alerts/")
    assert response.json()["count"] == 24


def test_an_admin_acknowledges_a_firing_alert_once(world: World, alerts: dict[str, Alert]) -> None:
    url = f"/api/v1/alerts/{alerts['bob'].pk}/acknowledge/"
    response = api_as(world.admin).post(url)
    assert response.status_code == 200
    assert response.json()["state"] == "acknowledged"
    assert response.json()["acknowledged_by"] == "admin"
    alert = Alert.objects.get(pk=alerts["bob"].pk)
    assert alert.state == "acknowledged" and alert.acknowledged_by == world.admin
    audited = AuditEvent.chain.filter(action="alert.acknowledged", target_id=str(alert.pk))
    assert audited.count() == 1
    again = api_as(world.admin).post(url)
    assert again.status_code == 400 and list(again.json()) == ["state"]
    assert audited.count() == 1


def test_only_admins_acknowledge(world: World, alerts: dict[str, Alert]) -> None:
    url = f"/api/v1/alerts/{alerts['bob'].pk}/acknowledge/"
    for user in (world.alice, world.bob):  # they see it, but do not manage it
        assert api_as(user).post(url).status_code == 403
    assert Alert.objects.get(pk=alerts["bob"].pk).state == "firing"
    assert api_as(world.admin).post("/api/v1/alerts/999999/acknowledge/").status_code == 404


@pytest.fixture
def incidents(world: World) -> list[Incident]:
    opened = Incident.objects.create(
        title="Reboot the node on h100-a-1",
        action="reboot",
        opened_at=T0,
        nodes=["h100-a-1"],
        gpus=["h100-a-1/2"],
        jobs=[7],
        teams=["vision"],
    )
    for minutes, kind, actor in ((0, "fault", None), (1, "action", None), (9, "note", world.admin)):
        IncidentEvent.objects.create(
            incident=opened, at=T0 + timedelta(minutes=minutes), kind=kind, text=kind, actor=actor
        )
    closed = Incident.objects.create(
        title="Reset the GPU on a100-c-0",
        action="reset_gpu",
        state="resolved",
        opened_at=T0 - timedelta(days=1),
        resolved_at=T0,
    )
    return [opened, closed]


def test_admins_list_incidents_and_read_one_with_its_timeline(
    world: World, incidents: list[Incident]
) -> None:
    admin = api_as(world.admin)
    rows = admin.get("/api/v1/incidents/").json()["results"]
    assert [row["id"] for row in rows] == [incident.pk for incident in incidents]
    only_open = admin.get("/api/v1/incidents/?state=open").json()["results"]
    assert [row["title"] for row in only_open] == ["Reboot the node on h100-a-1"]
    detail = admin.get(f"/api/v1/incidents/{incidents[0].pk}/").json()
    assert detail["gpus"] == ["h100-a-1/2"] and detail["teams"] == ["vision"]
    timeline = [(event["kind"], event["actor"]) for event in detail["events"]]
    assert timeline == [("fault", None), ("action", None), ("note", "admin")]
    refused = admin.get("/api/v1/incidents/?state=closed")
    assert refused.status_code == 400 and list(refused.json()) == ["state"]


def test_incidents_are_for_admins_only(world: World, incidents: list[Incident]) -> None:
    for user in (world.alice, world.bob, world.carol):
        assert api_as(user).get("/api/v1/incidents/").status_code == 403
        assert api_as(user).get(f"/api/v1/incidents/{incidents[0].pk}/").status_code == 403
    assert api_as(world.admin).get("/api/v1/incidents/999999/").status_code == 404


def test_the_schema_documents_alerts_and_incidents(world: World) -> None:
    schema = api_as(world.admin).get("/api/schema/?format=json").json()
    paths = schema["paths"]
    assert {"get"} <= set(paths["/api/v1/alerts/"])
    assert {"post"} <= set(paths["/api/v1/alerts/{alert_id}/acknowledge/"])
    assert {"get"} <= set(paths["/api/v1/incidents/{incident_id}/"])
    parameters = {p["name"] for p in paths["/api/v1/alerts/"]["get"]["parameters"]}
    assert {"state", "level"} <= parameters
