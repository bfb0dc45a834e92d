"""Scheduling predicates: would this pod fit on this node? Pure functions over dicts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubesim.quantity import parse_quantity
from kubesim.selectors import labels_match, selector_from_label_selector

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"
RESOURCES = ("cpu", "memory", GPU, "pods")


def pod_requests(pod: Obj) -> dict[str, float]:
    """Effective requests (init containers take the max, as the real scheduler computes)."""
    totals = dict.fromkeys(RESOURCES, 0.0)
    totals["pods"] = 1.0
    spec = pod.get("spec", {})
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if name in totals:
                totals[name] += parse_quantity(value)
    for container in spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if name in totals:
                totals[name] = max(totals[name], parse_quantity(value))
    return totals


@dataclass
class NodeInfo:
    """What the scheduler knows of a node: labels, taints, free resources."""

    name: str
    labels: dict[str, str]
    taints: list[Obj]
    unschedulable: bool
    allocatable: dict[str, float]
    used: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))
    pods: dict[str, Obj] = field(default_factory=dict)  # uid -> labels+namespace, for anti-affinity

    @classmethod
    def from_node(cls, node: Obj) -> NodeInfo:
        alloc = node.get("status", {}).get("allocatable") or {}
        return cls(
            name=node["metadata"]["name"],
            labels=dict(node["metadata"].get("labels") or {}),
            taints=list(node.get("spec", {}).get("taints") or []),
            unschedulable=bool(node.get("spec", {}).get("unschedulable")),
            allocatable={r: parse_quantity(alloc.get(r, 0)) for r in RESOURCES},
        )

    def free(self, resource: str) -> float:
        return self.allocatable[resource] - self.used[resource]


def tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expression_matches(expr: Obj, labels: dict[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        number, limit = int(labels[key]), int(values[0])
        return number > limit if op == "Gt" else number < limit
    return False


def _term_matches(term: Obj, node: NodeInfo) -> bool:
    fields = {"metadata.name": node.name}
    return all(
        _expression_matches(e, node.labels) for e in term.get("matchExpressions") or []
    ) and all(_expression_matches(e, fields) for e in term.get("matchFields") or [])


def affinity_terms(pod: Obj) -> list[Obj]:
    required = (
        pod["spec"]
        .get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
        or {}
    )
    return list(required.get("nodeSelectorTerms") or [])


def pinned_nodes(pod: Obj) -> set[str] | None:
    """Node names a pod is pinned to by matchFields metadata.name In, if every term pins."""
    names: set[str] = set()
    terms = affinity_terms(pod)
    for term in terms:
        pins = [
            e
            for e in term.get("matchFields") or []
            if e["key"] == "metadata.name" and e["operator"] == "In"
        ]
        if not pins:
            return None
        names.update(pins[0].get("values") or [])
    return names if terms else None


def _anti_affinity_ok(pod: Obj, node: NodeInfo) -> bool:
    anti = pod["spec"].get("affinity", {}).get("podAntiAffinity", {})
    namespace = pod["metadata"].get("namespace", "")
    for term in anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
        if term.get("topologyKey") != "kubernetes.io/hostname":
            continue
        selector = selector_from_label_selector(term.get("labelSelector"))
        namespaces = set(term.get("namespaces") or [namespace])
        for other in node.pods.values():
            if other["metadata"]["namespace"] in namespaces and labels_match(selector, other):
                return False
    return True


def why_not(pod: Obj, requests: dict[str, float], node: NodeInfo) -> str | None:
    """None when the pod fits; otherwise the reason as the real scheduler words it."""
    tolerations = pod["spec"].get("tolerations") or []
    if node.unschedulable and not tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return "node(s) were unschedulable"
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
    selector = pod["spec"].get("nodeSelector") or {}
    terms = affinity_terms(pod)
    if any(node.labels.get(k) != v for k, v in selector.items()) or (
        terms and not any(_term_matches(t, node) for t in terms)
    ):
        return "node(s) didn't match Pod's node affinity/selector"
    if not _anti_affinity_ok(pod, node):
        return "node(s) didn't match pod anti-affinity rules"
    for resource in (GPU, "cpu", "memory", "pods"):
        if requests[resource] and requests[resource] > node.free(resource) + 1e-9:
            return "Too many pods" if resource == "pods" else f"Insufficient {resource}"
    return None
