"""The resource types kubesim serves: the subset of Kubernetes the portal and kubectl use.

One table drives routing, discovery documents and the OpenAPI document, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Resource:
    """One REST resource (e.g. batch/v1 jobs)."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @cached_property  # asked on every write: worked out once
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def key(self) -> str:
        """Store key, unique across groups (`pods`, `jobs.batch`)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "namespaces", "namespace", "Namespace", False, ("ns",), ("status",)),
    Resource("", "v1", "nodes", "node", "Node", False, ("no",), ("status",)),
    Resource(
        "", "v1", "pods", "pod", "Pod", True, ("po",), ("status", "log", "eviction"), ("all",)
    ),
    Resource(
        "", "v1", "resourcequotas", "resourcequota", "ResourceQuota", True, ("quota",), ("status",)
    ),
    Resource("", "v1", "limitranges", "limitrange", "LimitRange", True, ("limits",)),
    Resource("", "v1", "events", "event", "Event", True, ("ev",)),
    Resource("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", True, ("sa",)),
    Resource("", "v1", "services", "service", "Service", True, ("svc",), ("status",), ("all",)),
    Resource("batch", "v1", "jobs", "job", "Job", True, (), ("status",), ("all",)),
    Resource(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        False,
        ("pc",),
    ),
    Resource(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        True,
        ("netpol",),
    ),
    Resource(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        True,
        ("pdb",),
        ("status",),
    ),
)

BY_PATH: dict[tuple[str, str, str], Resource] = {
    (r.group, r.version, r.plural): r for r in RESOURCES
}
BY_KEY: dict[str, Resource] = {r.key: r for r in RESOURCES}

POD = BY_KEY["pods"]
NODE = BY_KEY["nodes"]
NAMESPACE = BY_KEY["namespaces"]
JOB = BY_KEY["jobs.batch"]
EVENT = BY_KEY["events"]
QUOTA = BY_KEY["resourcequotas"]
LIMITRANGE = BY_KEY["limitranges"]
PRIORITYCLASS = BY_KEY["priorityclasses.scheduling.k8s.io"]
SERVICEACCOUNT = BY_KEY["serviceaccounts"]
SERVICE = BY_KEY["services"]


def verbs() -> list[str]:
    return list(_VERBS)


def groups() -> dict[str, list[str]]:
    """group -> versions, the core group excluded."""
    found: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group and r.version not in found.setdefault(r.group, []):
            found[r.group].append(r.version)
    return found
