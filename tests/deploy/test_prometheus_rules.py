"""deploy/prometheus/rules.yaml and deploy/grafana/*.json against the portal itself: every
default alert rule has its Prometheus twin (same metric, threshold, duration, level), and every
metric a rule or a dashboard names is one the portal's /metrics really exports.

Parsed only: promtool and Grafana are not needed to run the suite.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from jobs.actions import submit_job
from jobs.spec import parse_spec
from monitoring.models import AlertRule
from monitoring.schema import METRICS
from tests.conftest import World, spec
from tests.monitoring.conftest import (  # noqa: F401 (the fixtures)
    Rig,
    batch,
    fast_passwords,
    gpu_sample,
    post,
    rig,
)

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yaml"
DASHBOARDS = sorted((ROOT / "deploy" / "grafana").glob("*.json"))
TOKEN = "scrape-token-0123456789"
EXPR = re.compile(r"^(?P<metric>[A-Za-z_:][\w:]*) (?P<op>>=|<=) (?P<threshold>-?[\d.]+)$")
KNOWN_GAPS: dict[str, str] = {}
"""Metrics a rule names that /metrics cannot export yet, and why. A gap closed fails the test
below, so that it is taken off this list."""
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
LABEL_VALUES = re.compile(r"label_values\(\s*(?:([A-Za-z_:][\w:]*)\s*(?:\{[^}]*\})?\s*,)?\s*\w+\)")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: not functions, labels, keywords, numbers."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = GROUPING.sub(" ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", text):
        before = text[match.start() - 1] if match.start() else " "
        if before.isdigit() or before == ".":
            continue  # the exponent of a number (1e3)
        if text[match.end() :].lstrip().startswith("(") or match.group() in KEYWORDS:
            continue
        names.add(match.group())
    return names


def _alerts() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def _seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)([smh])", duration)
    assert match, f"unreadable duration {duration!r}"
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


def _twin(alert: dict[str, Any]) -> tuple[str, str, str, str, float, int]:
    match = EXPR.match(alert["expr"])
    assert match, f"{alert['alert']}: not `metric >= threshold`: {alert['expr']!r}"
    labels = alert["labels"]
    op, threshold = match.group("op"), float(match.group("threshold"))
    duration = _seconds(alert.get("for", "0s"))
    return labels["portal_rule"], labels["severity"], match.group("metric"), op, threshold, duration


def _board_exprs(board: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def _board_metrics(board: dict[str, Any]) -> set[str]:
    names = set().union(*(metric_names(expr) for expr in _board_exprs(board)))
    for variable in board["templating"]["list"]:
        names |= {m for m in LABEL_VALUES.findall(variable["query"]["query"]) if m}
    return names


def test_metric_names_reads_metrics_only() -> None:
    expr = 'sum by (team) (rate(x_total{a="b", c=~"$d"}[5m])) * 1e3 > bool on (a) y and z'
    assert metric_names(expr) == {"x_total", "y", "z"}
    assert LABEL_VALUES.findall('label_values(m{team="$team"}, job)') == ["m"]


@pytest.mark.django_db
def test_every_default_rule_has_its_prometheus_twin_at_each_level() -> None:
    portal = set()
    for rule in AlertRule.objects.all():  # after migrate: the defaults
        op = "<=" if rule.below else ">="
        for level, threshold in (("warning", rule.warning), ("critical", rule.critical)):
            if threshold is not None:
                portal.add((rule.name, level, rule.metric, op, threshold, rule.duration_s))
    assert len(portal) >= 11
    twins = [_twin(alert) for alert in _alerts()]
    assert len(twins) == len(set(twins))
    assert set(twins) == portal
    assert len({alert["alert"] for alert in _alerts()}) == len(twins)


def test_dashboards_take_the_datasource_and_their_subject_as_variables() -> None:
    subjects = {"cluster": set(), "team": {"team"}, "job": {"team", "job"}, "node": {"node"}}
    assert {board.stem for board in DASHBOARDS} == set(subjects)
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        assert [i["name"] for i in board["__inputs"]] == ["DS_PROMETHEUS"], path.name
        variables = {v["name"] for v in board["templating"]["list"]}
        assert subjects[path.stem] <= variables, path.name
        for panel in board["panels"]:
            assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", (path.name, panel["title"])
            assert all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" for t in panel["targets"])
        used = {m for e in _board_exprs(board) for m in re.findall(r"\$(\w+)", e)}
        assert used - {"__rate_interval"} <= variables, path.name
        assert len({p["id"] for p in board["panels"]}) == len(board["panels"]), path.name


def _exported(world: World, rig: Rig) -> tuple[set[str], dict[str, list[dict[str, str]]]]:  # noqa: F811
    """Every name a scrape of /metrics offers, and each family's samples' labels, after a
    batch of every field the agents send and with a job waiting in the queue."""
    every_field = gpu_sample(0, **dict.fromkeys(METRICS, 1))
    assert post(batch([every_field]), rig.token).status_code == 202
    submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)  # stays queued
    response = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    names: set[str] = set()
    labels: dict[str, list[dict[str, str]]] = {}
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
    for family in text_string_to_metric_families(response.content.decode()):
        names |= {family.name, *(family.name + s for s in suffixes.get(family.type, []))}
        names |= {sample.name for sample in family.samples}
        labels[family.name] = [sample.labels for sample in family.samples]
    return names, labels


@pytest.mark.django_db
def test_every_metric_a_rule_or_dashboard_names_is_exported(
    settings: Any,
    world: World,
    rig: Rig,  # noqa: F811
) -> None:
    settings.METRICS_TOKEN = TOKEN
    exported, labels = _exported(world, rig)
    named = {m: "rules.yaml" for alert in _alerts() for m in metric_names(alert["expr"])}
    for path in DASHBOARDS:
        named |= dict.fromkeys(_board_metrics(json.loads(path.read_text())), path.name)
    missing = {metric: where for metric, where in named.items() if metric not in exported}
    assert set(missing) == set(KNOWN_GAPS), missing
    # The portal's own figures carry the labels the rules' summaries and the dashboards use.
    (pending,) = labels["portal_job_pending_seconds"]
    assert pending["team"] == "vision" and pending["job"].isdigit() and pending["node"] == ""
    assert {"node": rig.node.name, "gpu": "", "team": "", "job": ""} in labels[
        "portal_node_not_ready"
    ]
    throttled = {(s["node"], s["gpu"], s["job"]) for s in labels["portal_gpu_throttled"]}
    assert throttled == {(rig.node.name, "0", str(rig.job.pk))}
