"""Alert rules over the latest samples, on a fake clock: duration, dedupe, repeat, silences,
escalation and resolution, every change audited; who sees which alerts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from audit.models import AuditEvent
from cluster.models import Node
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from monitoring import hot
from monitoring.alerts.actions import acknowledge, add_silence, save_rule
from monitoring.alerts.round import evaluate_alerts
from monitoring.models import Alert, AlertRule
from notifications.models import Notification
from tests.conftest import World, spec
from tests.notifications.eager import eager_celery  # noqa: F401 (autouse)

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TEMP = "DCGM_FI_DEV_GPU_TEMP"


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def node(world: World) -> Node:
    return Node.objects.create(
        name="h100-a-1", gpu_type=world.h100, gpu_capacity=8, gpu_allocatable=8, ready=True
    )


@pytest.fixture
def job(world: World, node: Node) -> Job:
    job = submit_job(world.vision, parse_spec(spec(gpus_per_node=1)), acting_user=world.bob)
    Job.unscoped.filter(pk=job.pk).update(state=State.RUNNING, placement={node.name: 1})
    return job


def _only(rule_name: str) -> AlertRule:
    AlertRule.objects.exclude(name=rule_name).update(enabled=False)
    return AlertRule.objects.get(name=rule_name)


def _temp(node: Node, clock: FakeClock, celsius: float, job: Job | None = None) -> None:
    sample: dict[str, Any] = {"index": 3, "at": clock.now.timestamp(), TEMP: celsius}
    sample["job_id"] = job.pk if job else None
    hot.store({node.pk: {3: sample}})


def _told(user: Any) -> list[str]:
    return list(
        Notification.objects.filter(user=user).order_by("id").values_list("title", flat=True)
    )


def test_an_alert_fires_only_after_its_duration_and_only_once(
    world: World, node: Node, job: Job, clock: FakeClock
) -> None:
    _only("GPU temperature")  # warning 83, critical 90, for 60 s
    _temp(node, clock, 85, job)
    evaluate_alerts(clock.now)
    alert = Alert.objects.get()
    assert (alert.state, alert.level, alert.subject) == ("pending", "warning", "h100-a-1/gpu3")
    assert _told(world.admin) == []
    _temp(node, clock, 86, job)
    evaluate_alerts(clock.advance(59))
    assert Alert.objects.get().state == "pending"
    evaluate_alerts(clock.advance(1))
    alert = Alert.objects.get()
    assert alert.state == "firing" and alert.team == world.vision and alert.job_id == job.pk
    for _ in range(5):  # deduplicated: still one alert, told once
        evaluate_alerts(clock.advance(10))
    assert Alert.objects.count() == 1
    assert len(_told(world.admin)) == 1 and "firing" in _told(world.admin)[0]
    assert len(_told(world.alice)) == 1  # vision's lead
    assert len(_told(world.bob)) == 1  # the job's owner
    assert _told(world.carol) == []
    actions = list(
        AuditEvent.chain.filter(target_type="monitoring.alert").values_list("action", flat=True)
    )
    assert actions == ["alert.firing"]


def test_a_condition_that_clears_before_its_duration_never_fires(
    world: World, node: Node, clock: FakeClock
) -> None:
    _only("GPU temperature")
    _temp(node, clock, 85)
    evaluate_alerts(clock.now)
    _temp(node, clock, 60)
    evaluate_alerts(clock.advance(30))
    assert not Alert.objects.exists() and _told(world.admin) == []


def test_a_firing_alert_repeats_until_acknowledged_and_resolves(
    world: World, node: Node, clock: FakeClock
) -> None:
    rule = _only("GPU temperature")
    rule.repeat_s, rule.duration_s = 600, 0
    rule.save()
    _temp(node, clock, 85)
    evaluate_alerts(clock.now)
    evaluate_alerts(clock.advance(599))
    assert len(_told(world.admin)) == 1
    evaluate_alerts(clock.advance(1))
    assert len(_told(world.admin)) == 2 and "still firing" in _told(world.admin)[1]
    acknowledge(Alert.objects.get(), acting_user=world.admin)
    evaluate_alerts(clock.advance(3600))
    assert len(_told(world.admin)) == 2  # acknowledged: no repeats
    _temp(node, clock, 92)  # worse: fires again at once
    evaluate_alerts(clock.advance(5))
    alert = Alert.objects.get()
    assert (alert.state, alert.level) == ("firing", "critical")
    assert "escalated" in _told(world.admin)[-1]
    _temp(node, clock, 50)
    evaluate_alerts(clock.advance(5))
    assert Alert.objects.get().state == "resolved" and "resolved" in _told(world.admin)[-1]
    actions = list(
        AuditEvent.chain.filter(target_type="monitoring.alert")
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions == ["alert.firing", "alert.acknowledged", "alert.escalated", "alert.resolved"]
    _temp(node, clock, 85)  # a new occurrence is a new alert
    evaluate_alerts(clock.advance(5))
    assert Alert.objects.filter(state="firing").count() == 1 and Alert.objects.count() == 2


def test_a_silence_keeps_quiet_until_it_ends(world: World, node: Node, clock: FakeClock) -> None:
    rule = _only("GPU temperature")
    rule.duration_s = 0
    rule.save()
    add_silence(
        {"rule": str(rule.pk), "subject": "h100-a-1/", "minutes": "30", "reason": "fan swap"},
        acting_user=world.admin,
        now=clock.now,
    )
    _temp(node, clock, 85)
    evaluate_alerts(clock.now)
    assert Alert.objects.get().state == "firing" and _told(world.admin) == []
    evaluate_alerts(clock.advance(29 * 60))
    assert _told(world.admin) == []
    evaluate_alerts(clock.advance(61))
    assert len(_told(world.admin)) == 1
    assert AuditEvent.chain.filter(action="silence.create").count() == 1


def test_the_most_specific_rule_sets_a_teams_threshold(world: World, clock: FakeClock) -> None:
    _only("Job pending too long")  # cluster: warning after an hour
    save_rule(
        None,
        {
            "name": "nlp waits",
            "metric": "portal_job_pending_seconds",
            "scope": "team",
            "scope_value": "nlp",
            "warning": "600",
        },
        acting_user=world.admin,
    )
    vision = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    nlp = submit_job(world.nlp, parse_spec(spec(team="nlp")), acting_user=world.carol)
    submitted = Job.unscoped.get(pk=vision.pk).submitted_at
    evaluate_alerts(submitted + timedelta(seconds=900))
    assert list(Alert.objects.values_list("subject", "rule__name")) == [
        (f"job {nlp.pk}", "nlp waits")
    ]
    evaluate_alerts(submitted + timedelta(seconds=3700))
    assert set(Alert.objects.values_list("subject", "rule__name")) == {
        (f"job {nlp.pk}", "nlp waits"),
        (f"job {vision.pk}", "Job pending too long"),
    }


def test_node_figures_raise_their_default_rules(world: World, node: Node, clock: FakeClock) -> None:
    Node.objects.filter(pk=node.pk).update(ready=False, gpu_allocatable=6)
    evaluate_alerts(clock.now)
    evaluate_alerts(clock.advance(120))
    firing = set(Alert.objects.filter(state="firing").values_list("rule__name", "subject"))
    assert firing == {("Node NotReady", "h100-a-1"), ("GPUs below capacity", "h100-a-1")}


def test_bad_rule_input_names_the_field_and_changes_nothing(world: World) -> None:
    from base.errors import FieldErrors

    before = AlertRule.objects.count()
    with pytest.raises(FieldErrors) as caught:
        save_rule(None, {"name": "x", "metric": "m", "warning": "hot"}, acting_user=world.admin)
    assert "warning" in caught.value.errors
    with pytest.raises(FieldErrors) as caught:
        save_rule(
            None,
            {"name": "x", "metric": "m", "warning": "1", "duration_s": "9999999"},
            acting_user=world.admin,
        )
    assert "duration_s" in caught.value.errors and "604800" in caught.value.errors["duration_s"]
    assert AlertRule.objects.count() == before


def test_who_sees_which_alerts_on_the_page(
    world: World, node: Node, job: Job, clock: FakeClock
) -> None:
    rule = _only("GPU temperature")
    rule.duration_s = 0
    rule.save()
    _temp(node, clock, 85, job)
    evaluate_alerts(clock.now)
    for user, sees in (
        (world.admin, True),
        (world.alice, True),
        (world.bob, True),
        (world.carol, False),
    ):
        client = Client()
        client.force_login(user)
        page = client.get("/alerts/")
        assert page.status_code == 200
        assert ("h100-a-1/gpu3" in page.content.decode()) is sees, user.username
    outsider = Client()
    outsider.force_login(world.carol)
    alert = Alert.objects.get()
    assert outsider.post(f"/alerts/{alert.pk}/acknowledge/").status_code == 403  # admins only
    assert Alert.objects.get().state == "firing"
    assert outsider.get("/manage/alert-rules/").status_code == 403
    admin = Client()
    admin.force_login(world.admin)
    assert admin.post(f"/alerts/{alert.pk}/acknowledge/").status_code == 302
    assert Alert.objects.get().state == "acknowledged"
    response = admin.post("/manage/alert-rules/", {"name": "hot", "metric": TEMP, "warning": "x"})
    assert response.status_code == 302 and not AlertRule.objects.filter(name="hot").exists()
