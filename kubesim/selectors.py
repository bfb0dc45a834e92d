"""Label and field selectors, parsed once per request and matched against stored objects."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesim.errors import bad_request

Obj = dict[str, Any]

_SET_RE = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


@dataclass(frozen=True)
class Requirement:
    """One clause: key, operator (=, !=, in, notin, exists, !), values."""

    key: str
    op: str
    values: frozenset[str]

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # != and notin


def _split_clauses(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    clauses: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            clauses.append("".join(current))
            current = []
        else:
            current.append(char)
    clauses.append("".join(current))
    return [c.strip() for c in clauses if c.strip()]


def _parse_clause(clause: str) -> Requirement:
    match = _SET_RE.match(clause)
    if match:
        values = frozenset(v.strip() for v in match.group(4).split(",") if v.strip())
        return Requirement(match.group(2), match.group(3), values)
    for op in ("!=", "==", "="):
        if op in clause:
            key, _, value = clause.partition(op)
            return Requirement(key.strip(), "=" if op == "==" else op, frozenset([value.strip()]))
    if clause.startswith("!"):
        return Requirement(clause[1:].strip(), "!", frozenset())
    if re.fullmatch(r"[A-Za-z0-9_./-]+", clause):
        return Requirement(clause, "exists", frozenset())
    raise bad_request(f"unable to parse requirement: {clause!r}")


def parse_label_selector(text: str | None) -> list[Requirement]:
    return [_parse_clause(c) for c in _split_clauses(text or "")]


def labels_match(requirements: list[Requirement], obj: Obj) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return all(r.matches(labels) for r in requirements)


def selector_from_label_selector(selector: Obj | None) -> list[Requirement]:
    """A metav1.LabelSelector (matchLabels + matchExpressions) as requirements."""
    if not selector:
        return []
    reqs = [Requirement(k, "=", frozenset([v])) for k, v in selector.get("matchLabels", {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        reqs.append(
            Requirement(expr["key"], ops[expr["operator"]], frozenset(expr.get("values") or []))
        )
    return reqs


def _field_getter(path: str) -> Callable[[Obj], str]:
    parts = path.split(".")

    def get(obj: Obj) -> str:
        value: Any = obj
        for part in parts:
            value = value.get(part) if isinstance(value, dict) else None
            if value is None:
                return ""
        return str(value)

    return get


_FIELDS = {
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.unschedulable",
    "spec.schedulerName",
    "status.phase",
    "status.podIP",
    "status.successful",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "source",
    "type",
}

FieldSelector = list[tuple[Callable[[Obj], str], bool, str]]


def parse_field_selector(text: str | None) -> FieldSelector:
    """Each clause is (getter, equal?, value); only the fields the API server supports."""
    result: FieldSelector = []
    for clause in _split_clauses(text or ""):
        for op in ("!=", "==", "="):
            if op in clause:
                field, _, value = clause.partition(op)
                field = field.strip()
                if field not in _FIELDS:
                    raise bad_request(f"field label not supported: {field}")
                result.append((_field_getter(field), op != "!=", value.strip()))
                break
        else:
            raise bad_request(f"invalid selector: {clause!r}; can't understand '{clause}'")
    return result


def fields_match(selector: FieldSelector, obj: Obj) -> bool:
    return all((get(obj) == value) == equal for get, equal, value in selector)
