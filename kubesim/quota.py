"""ResourceQuota: admission with the real "exceeded quota" message, and status.used upkeep."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kubesim.errors import forbidden
from kubesim.quantity import format_quantity, parse_quantity
from kubesim.resources import JOB, POD, QUOTA, Resource
from kubesim.store import Store

Obj = dict[str, Any]
Usage = dict[str, float]


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


def namespace_usage(store: Store, namespace: str) -> Usage:
    total: Usage = defaultdict(float)
    for resource in (POD, JOB):
        for stored in store.items(resource.key, namespace):
            for name, value in object_usage(resource, stored.obj).items():
                total[name] += value
    return total


def _pairs(names: list[str], values: Usage) -> str:
    return ",".join(f"{n}={format_quantity(n, values.get(n, 0))}" for n in names)


def admit(store: Store, resource: Resource, namespace: str, obj: Obj) -> None:
    """Reject a create that would push any quota of the namespace over its hard limits."""
    quotas = list(store.items(QUOTA.key, namespace))
    request = object_usage(resource, obj)
    if not quotas or not request:
        return
    used = namespace_usage(store, namespace)
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
