"""Admission on create: defaulting, priority, LimitRange defaults, validation and quota.

The order follows the real API server: defaulters, then mutating plugins, then validation, then
ResourceQuota, which must see the final requests.
"""

from __future__ import annotations

from typing import Any

from kubesim import defaults, quota
from kubesim.errors import forbidden
from kubesim.resources import JOB, LIMITRANGE, NAMESPACE, POD, PRIORITYCLASS, SERVICE, Resource
from kubesim.store import Store
from kubesim.validation import validate

Obj = dict[str, Any]


def _priority(store: Store, pod: Obj) -> None:
    spec = pod["spec"]
    name = spec.get("priorityClassName")
    classes = [s.obj for s in store.items(PRIORITYCLASS.key, "")]
    if name:
        match = next((c for c in classes if c["metadata"]["name"] == name), None)
        if match is None:
            raise forbidden(
                "pods",
                "",
                pod["metadata"].get("name", ""),
                f"no PriorityClass with name {name} was found",
            )
    else:
        match = next((c for c in classes if c.get("globalDefault")), None)
        if match is not None:
            spec["priorityClassName"] = match["metadata"]["name"]
    spec["priority"] = int(match["value"]) if match else 0
    if match and match.get("preemptionPolicy"):
        spec["preemptionPolicy"] = match["preemptionPolicy"]


def _limit_range_defaults(store: Store, namespace: str, pod: Obj) -> None:
    for stored in store.items(LIMITRANGE.key, namespace):
        for limit in stored.obj.get("spec", {}).get("limits") or []:
            if limit.get("type") != "Container":
                continue
            for container in pod["spec"].get("containers") or []:
                resources = container.setdefault("resources", {})
                for field, source in (("limits", "default"), ("requests", "defaultRequest")):
                    for name, value in (limit.get(source) or {}).items():
                        resources.setdefault(field, {}).setdefault(name, value)


def _cluster_ip(uid: str) -> str:
    """An address in the service range, from the Service's uid (kubesim routes no traffic)."""
    number = int(uid.replace("-", "")[-4:], 16)
    return f"10.96.{number >> 8}.{number & 255}"


def admit_create(
    store: Store,
    resource: Resource,
    namespace: str,
    obj: Obj,
    toleration_seconds: int,
    used: quota.Usage,
) -> None:
    if resource is POD:
        defaults.default_pod(obj, toleration_seconds)
        _priority(store, obj)
        _limit_range_defaults(store, namespace, obj)
        for container in obj["spec"].get("containers") or []:
            defaults.default_container(container)
        obj["status"]["qosClass"] = defaults.qos_class(obj["spec"])
    elif resource is JOB:
        defaults.default_job(obj)
    elif resource is NAMESPACE:
        defaults.default_namespace(obj)
    elif resource is SERVICE:
        defaults.default_service(obj, _cluster_ip(obj["metadata"]["uid"]))
    validate(resource, obj)
    quota.admit(store, resource, namespace, obj, used)
