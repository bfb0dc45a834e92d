"""The one seam between the portal and a cluster. Objects cross it as plain dicts.

`cluster.kube.KubernetesBackend` is the implementation (the only module importing the client);
tests and the demo point it at kubesim, production at a real cluster.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

Obj = dict[str, Any]


class Expired(Exception):
    """The watch's resourceVersion is too old (HTTP 410): list again."""


class Unavailable(Exception):
    """The cluster API could not be reached or answered 5xx; retry with backoff."""


@dataclass(frozen=True)
class Listing:
    items: list[Obj]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: Obj


class ClusterBackend(Protocol):
    def apply(self, obj: Obj) -> None:
        """Create the object, or bring an existing one of that name in line with it."""

    def create_job(self, obj: Obj) -> bool:
        """Create a batch/v1 Job; False when one of that name already exists (a retried create)."""

    def delete_job(self, namespace: str, name: str) -> bool:
        """Delete a Job and, in the background, its pods; False when it was already gone."""

    def expire_job(self, namespace: str, name: str, ttl_s: int) -> bool:
        """Let Kubernetes delete a finished Job `ttl_s` after it finished (its outcome is
        recorded); False when it was already gone."""

    def list(self, kind: str, label_selector: str = "", field_selector: str = "") -> Listing:
        """kind is one of "jobs", "pods", "nodes", "events", across all namespaces."""

    def watch(
        self,
        kind: str,
        resource_version: str,
        label_selector: str = "",
        timeout_s: int = 60,
        field_selector: str = "",
    ) -> Iterator[WatchEvent]:
        """Changes since resource_version; raises Expired when the history no longer has it."""

    def follow_log(self, namespace: str, pod: str) -> AsyncIterator[str]:
        """The pod's log lines from the start, as they are written, until the pod ends (an
        async iterator: one event loop follows every running pod)."""

    async def close_log_streams(self) -> None:
        """Let go of what following logs holds on the running loop (its follows have ended)."""

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        """Cordon or uncordon a node."""

    def reachable(self) -> bool:
        """Whether the API server answers now (its version: a probe's cheapest call)."""

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> bool:
        """Merge `patch` into a pod (its annotations: what the downward API shows the
        containers); False when the pod is gone."""
