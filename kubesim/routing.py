"""Parse a Kubernetes REST path into (resource, namespace, name, subresource)."""

from __future__ import annotations

from dataclasses import dataclass

from kubesim.errors import ApiError
from kubesim.resources import BY_PATH, NAMESPACE, Resource


@dataclass(frozen=True)
class Route:
    resource: Resource
    namespace: str | None  # None: across all namespaces (or cluster-scoped)
    name: str
    sub: str

    @property
    def ns(self) -> str:
        return self.namespace or ""


def _not_found(path: str) -> ApiError:
    return ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")


def parse(path: str) -> Route:
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise _not_found(path)
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise _not_found(path)
    resource = BY_PATH.get((group, version, rest[0]))
    if resource is None or (namespace is not None and not resource.namespaced):
        raise _not_found(path)
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in resource.subresources:
        raise _not_found(path)
    if resource.namespaced and name and namespace is None:
        raise _not_found(path)
    if resource is NAMESPACE and name:
        namespace = None
    return Route(resource, namespace, name, sub)
