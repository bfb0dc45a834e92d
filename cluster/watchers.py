"""Watch threads: follow Jobs, Pods and Nodes from a resourceVersion into one queue.

They touch no database: the controller's single loop applies what they saw, in order. On 410
(history expired) a watcher lists again and hands the whole listing over; while the API is away
it backs off exponentially, then resumes from the last resourceVersion it saw.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass

from cluster.backend import ClusterBackend, Expired, Obj, Unavailable

log = logging.getLogger(__name__)
BACKOFF_START_S, BACKOFF_MAX_S = 0.5, 10.0
WATCH_TIMEOUT_S = 30


@dataclass(frozen=True)
class Seen:
    """One thing a watcher saw: an event, or (type RELIST) a complete listing."""

    kind: str
    type: str
    object: Obj | None = None
    items: tuple[Obj, ...] = ()


class Watcher(threading.Thread):
    def __init__(
        self,
        backend: ClusterBackend,
        kind: str,
        selector: str,
        resource_version: str,
        out: queue.Queue[Seen],
        stop: threading.Event,
        fields: str = "",
    ) -> None:
        super().__init__(name=f"watch-{kind}", daemon=True)
        self.backend, self.kind, self.selector, self.fields = backend, kind, selector, fields
        self.resource_version, self.out, self.stop = resource_version, out, stop
        self.relists = 0

    def run(self) -> None:
        backoff = BACKOFF_START_S
        while not self.stop.is_set():
            try:
                self._watch_once()
                backoff = BACKOFF_START_S
            except Expired:
                log.info("watch %s: resourceVersion expired, listing again", self.kind)
                self._relist()
            except Unavailable as exc:
                log.warning("watch %s: %s; retrying in %.1f s", self.kind, exc, backoff)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _watch_once(self) -> None:
        events = self.backend.watch(
            self.kind,
            self.resource_version,
            self.selector,
            timeout_s=WATCH_TIMEOUT_S,
            field_selector=self.fields,
        )
        for event in events:
            if self.stop.is_set():
                return
            version = (event.object.get("metadata") or {}).get("resourceVersion")
            if version:
                self.resource_version = version
            if event.type != "BOOKMARK":
                self.out.put(Seen(self.kind, event.type, event.object))

    def _relist(self) -> None:
        try:
            listing = self.backend.list(self.kind, self.selector, self.fields)
        except Unavailable as exc:
            log.warning("list %s: %s", self.kind, exc)
            self.stop.wait(BACKOFF_START_S)
            return
        self.relists += 1
        self.resource_version = listing.resource_version
        self.out.put(Seen(self.kind, "RELIST", items=tuple(listing.items)))
