"""What a round of alert evaluation reads and writes: only the fields its rules name, only the
values past a threshold (and never one short of it that would breach), a number of queries
that does not grow with the fleet, and nothing written but what changed."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.models import Node
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from monitoring import hot
from monitoring.alerts import evaluate, figures
from monitoring.alerts.evaluate import RuleView, breaches
from monitoring.alerts.figures import THROTTLED, Past, Reading, gather, read
from monitoring.alerts.round import evaluate_alerts
from monitoring.models import Alert, AlertRule
from tests.conftest import World, spec
from tests.notifications.eager import eager_celery  # noqa: F401 (autouse)

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TEMP = "DCGM_FI_DEV_GPU_TEMP"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
POWER = "DCGM_FI_DEV_POWER_USAGE"


def _nodes(world: World, count: int, prefix: str = "n") -> list[Node]:
    return [
        Node.objects.create(
            name=f"{prefix}-{n}", gpu_type=world.h100, gpu_capacity=8, gpu_allocatable=8, ready=True
        )
        for n in range(count)
    ]


def _sample(index: int, fields: dict[str, Any], job_id: int | None = None) -> dict[str, Any]:
    base: dict[str, Any] = {"index": index, "at": T0.timestamp(), "job_id": job_id, "pod": ""}
    base |= {TEMP: 50, UTIL: 60, POWER: 400.0, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 0}
    return base | fields


def _store(nodes: list[Node], fields: dict[str, Any]) -> None:
    hot.store({node.pk: {i: _sample(i, fields) for i in range(8)} for node in nodes})


def _running_job(world: World, node: Node) -> Job:
    job = submit_job(world.vision, parse_spec(spec(gpus_per_node=8)), acting_user=world.bob)
    Job.unscoped.filter(pk=job.pk).update(state=State.RUNNING, placement={node.name: 8})
    return job


def _views() -> list[RuleView]:
    return [
        RuleView(r.pk, r.metric, r.scope, r.scope_value, r.below, r.warning, r.critical)
        for r in AlertRule.objects.filter(enabled=True)
    ]


def test_a_round_reads_only_the_fields_its_rules_name(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    (node,) = _nodes(world, 1)
    hot.store({node.pk: {0: _sample(0, {TEMP: 95})}})
    asked: list[str] = []
    values = Reading.values

    def spy(self: Reading, metric: str, past: Past | None = None) -> figures.Values:
        asked.append(metric)
        return values(self, metric, past)

    monkeypatch.setattr(Reading, "values", spy)
    evaluate_alerts(T0)
    named = set(AlertRule.objects.filter(enabled=True).values_list("metric", flat=True))
    assert sorted(asked) == sorted(named)  # each once, and neither UTIL nor POWER
    assert UTIL not in asked and POWER not in asked
    assert Alert.objects.get(rule__metric=TEMP).subject == "n-0/gpu0"  # 95 °C breached


def test_node_figures_alone_read_no_samples(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    AlertRule.objects.exclude(name="Node NotReady").update(enabled=False)
    (node,) = _nodes(world, 1)
    Node.objects.filter(pk=node.pk).update(ready=False)

    def unread(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the samples were read")

    monkeypatch.setattr(hot, "of_nodes", unread)
    evaluate_alerts(T0)
    assert Alert.objects.get().subject == "n-0"
    assert set(gather(T0, ["portal_node_not_ready"])) == {"portal_node_not_ready"}


def test_only_values_past_a_threshold_are_compared_and_none_that_breaches_is_missed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = _nodes(world, 3)
    job = _running_job(world, nodes[0])
    hot.store(
        {
            nodes[0].pk: {  # temperatures at, around and past the thresholds (83, 90)
                i: _sample(i, {TEMP: t, UTIL: u}, job.pk)
                for i, (t, u) in enumerate([(82.99, 0), (83, 1), (89.9, 1.01), (90, 100)])
            },
            nodes[1].pk: {  # the node's own rule (70, 80) replaces the cluster's here
                0: _sample(0, {TEMP: 75, POWER: 750.0}),  # its power rule has no threshold
                1: _sample(1, {TEMP: 69}),
                2: _sample(2, {TEMP: 85, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 0x8}),
            },
            nodes[2].pk: {0: _sample(0, {TEMP: 60, POWER: 700.0})},
        }
    )
    rules = [
        ("util low", UTIL, "cluster", "", True, 1, None),  # below: at most 1
        ("vision util", UTIL, "team", "vision", True, 1.01, 0),  # replaces it for vision
        ("n-1 hot", TEMP, "node", "n-1", False, 70, 80),
        ("power", POWER, "cluster", "", False, 700, None),
        ("no threshold", POWER, "node", "n-1", False, None, None),
    ]
    for name, metric, scope, value, below, warning, critical in rules:
        AlertRule.objects.create(
            name=name,
            metric=metric,
            scope=scope,
            scope_value=value,
            below=below,
            warning=warning,
            critical=critical,
        )
    views = _views()
    found = breaches(views, read(T0, {v.metric for v in views}))
    monkeypatch.setattr(evaluate, "reach", lambda rules: Past(-math.inf, math.inf))
    assert found == breaches(views, gather(T0))  # every value compared: the same breaches
    names = dict(AlertRule.objects.values_list("pk", "name"))
    levels = {(names[rule], subject): b.level for (rule, subject), b in found.items()}
    assert levels == {
        ("GPU temperature", "n-0/gpu1"): "warning",
        ("GPU temperature", "n-0/gpu2"): "warning",
        ("GPU temperature", "n-0/gpu3"): "critical",
        ("vision util", "n-0/gpu0"): "critical",
        ("vision util", "n-0/gpu1"): "warning",
        ("vision util", "n-0/gpu2"): "warning",
        ("n-1 hot", "n-1/gpu0"): "warning",
        ("n-1 hot", "n-1/gpu2"): "critical",
        ("GPU throttled", "n-1/gpu2"): "warning",
        ("power", "n-2/gpu0"): "warning",
    }
    assert set(read(T0, [THROTTLED]).values(THROTTLED, Past(1))) == {"n-1/gpu2"}


def _round_queries(at: datetime) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        evaluate_alerts(at)
    return [q["sql"] for q in queries.captured_queries]


def test_a_rounds_queries_do_not_grow_with_the_fleet(world: World) -> None:
    small = _nodes(world, 2)
    _running_job(world, small[0])
    _store(small, {TEMP: 85})
    evaluate_alerts(T0)
    steady = _round_queries(T0 + timedelta(seconds=5))
    big = small + _nodes(world, 10, prefix="m")
    _store(big, {TEMP: 85})
    evaluate_alerts(T0 + timedelta(seconds=10))  # opens the new GPUs' pending alerts
    assert Alert.objects.filter(state="pending").count() == 12 * 8
    assert len(_round_queries(T0 + timedelta(seconds=15))) == len(steady)
    written = [sql for sql in steady if not sql.startswith(("SELECT", "SAVEPOINT", "RELEASE"))]
    assert written == []  # nothing changed: nothing written


def test_the_alerts_a_round_changes_are_not_written_one_by_one(world: World) -> None:
    nodes = _nodes(world, 2)
    _store(nodes, {TEMP: 85})
    evaluate_alerts(T0)  # pending: the rule holds for 60 s
    fired_at = T0 + timedelta(seconds=60)
    _store(nodes[:1], {TEMP: 85, "at": fired_at.timestamp()})
    _store(nodes[1:], {TEMP: 92, "at": fired_at.timestamp()})  # worse while pending
    sql = _round_queries(fired_at)  # 16 fired: 8 as they were, 8 at a new level and value
    assert len([s for s in sql if s.startswith('UPDATE "monitoring_alert"')]) <= 2  # not 16
    rows = Alert.objects.values_list("subject", "state", "level", "value", "fired_at")
    assert sorted(rows) == sorted(
        [(f"n-0/gpu{i}", "firing", "warning", 85.0, fired_at) for i in range(8)]
        + [(f"n-1/gpu{i}", "firing", "critical", 92.0, fired_at) for i in range(8)]
    )
    assert set(Alert.objects.values_list("notified_at", flat=True)) == {fired_at}
