"""ResourceQuota: admission with the real "exceeded quota" message, and status.used upkeep."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kubesim.errors import forbidden
from kubesim.quantity import format_quantity, parse_quantity
from kubesim.resources import JOB, POD, QUOTA, Resource
from kubesim.store import Store, Stored

Obj = dict[str, Any]
Usage = dict[str, float]
_COUNTED = {POD.key: POD, JOB.key: JOB}


def pod_is_terminal(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def pod_usage(pod: Obj) -> Usage:
    usage: Usage = defaultdict(float)
    usage["pods"] = usage["count/pods"] = 1
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        for kind in ("requests", "limits"):
            for name, value in (resources.get(kind) or {}).items():
                usage[f"{kind}.{name}"] += parse_quantity(value)
                if kind == "requests" and name in ("cpu", "memory"):
                    usage[name] += parse_quantity(value)
    return usage


def object_usage(resource: Resource, obj: Obj) -> Usage:
    if resource is POD:
        return {} if pod_is_terminal(obj) else pod_usage(obj)
    if resource is JOB:
        return {"count/jobs.batch": 1}
    return {}


def _same_requests(old: Obj, new: Obj) -> bool:
    """Whether an update left what the object counts against quota as it was (but phase)."""
    spec = old.get("spec") or {}
    return spec.get("containers") == (new.get("spec") or {}).get("containers")


class NamespaceUsage:
    """What the pods and Jobs of each namespace use, kept current from the store's changes.

    Admission and quota status read it instead of summing every object of the namespace
    again, which cost time in proportion to the namespace's size on every create.
    """

    def __init__(self, store: Store) -> None:
        self._totals: dict[str, Usage] = {}
        self._counted: dict[tuple[str, str, str], Usage] = {}
        store.listeners.append(self.on_change)

    def of(self, namespace: str) -> Usage:
        return self._totals.get(namespace, {})

    def on_change(self, resource: str, type_: str, new: Stored, old: Stored | None) -> None:
        kind = _COUNTED.get(resource)
        if kind is None:
            return
        key = (resource, new.namespace, new.name)
        before = self._counted.pop(key, {})
        if type_ == "DELETED":
            after: Usage = {}
        elif before and old is not None and _same_requests(old.obj, new.obj):
            after = {} if pod_is_terminal(new.obj) else before
        else:
            after = object_usage(kind, new.obj)
        if after:
            self._counted[key] = after
        if before != after:
            self._add(new.namespace, before, -1)
            self._add(new.namespace, after, +1)

    def _add(self, namespace: str, usage: Usage, sign: int) -> None:
        total = self._totals.setdefault(namespace, {})
        for name, value in usage.items():
            # Rounded to the smallest quantity (1n), so sums and differences never drift.
            total[name] = round(total.get(name, 0.0) + sign * value, 9)


def _pairs(names: list[str], values: Usage) -> str:
    return ",".join(f"{n}={format_quantity(n, values.get(n, 0))}" for n in names)


def admit(store: Store, resource: Resource, namespace: str, obj: Obj, used: Usage) -> None:
    """Reject a create that would push any quota of the namespace over its hard limits."""
    request = object_usage(resource, obj)
    quotas = list(store.items(QUOTA.key, namespace)) if request else []
    if not quotas:
        return
    for stored in sorted(quotas, key=lambda s: s.name):
        hard = {
            k: parse_quantity(v) for k, v in (stored.obj.get("spec", {}).get("hard") or {}).items()
        }
        over = sorted(n for n in hard if n in request and used.get(n, 0) + request[n] > hard[n])
        if over:
            meta = obj["metadata"]
            name = meta.get("name") or meta.get("generateName", "")
            why = (
                f"exceeded quota: {stored.name}, requested: {_pairs(over, request)}, "
                f"used: {_pairs(over, used)}, limited: {_pairs(over, hard)}"
            )
            raise forbidden(resource.plural, resource.group, name, why)


def quota_status(quota: Obj, used: Usage) -> Obj:
    hard = quota.get("spec", {}).get("hard") or {}
    return {"hard": dict(hard), "used": {n: format_quantity(n, used.get(n, 0)) for n in hard}}
