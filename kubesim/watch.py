"""Watch streams: initial state or history replay, then live changes, filtered by selector.

An object that starts or stops matching the selector arrives as ADDED or DELETED, as from the
real watch cache. Bookmarks carry only kind, apiVersion and metadata.resourceVersion.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from kubesim.resources import Resource
from kubesim.selectors import FieldSelector, Requirement, fields_match, labels_match
from kubesim.store import Change, Store, Stored, Watcher, dumps

BOOKMARK_INTERVAL_S = 5.0


@dataclass
class WatchFilter:
    """What one watch asks for: namespace (None = all), label and field selectors."""

    namespace: str | None
    labels: list[Requirement]
    fields: FieldSelector

    def matches(self, stored: Stored | None) -> bool:
        if stored is None:
            return False
        if self.namespace is not None and stored.namespace != self.namespace:
            return False
        return (not self.labels or labels_match(self.labels, stored.obj)) and (
            not self.fields or fields_match(self.fields, stored.obj)
        )


def event_line(type_: str, stored: Stored) -> bytes:
    return b'{"type":"' + type_.encode() + b'","object":' + stored.raw + b"}\n"


def translate(change: Change, flt: WatchFilter) -> str | None:
    """The event type this watch sees for a change, if any."""
    now = flt.matches(change.new) if change.type != "DELETED" else False
    before = flt.matches(change.old)
    if change.type == "DELETED":
        return "DELETED" if before else None
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    if before:
        return "DELETED"
    return None


def bookmark(resource: Resource, rv: int) -> bytes:
    obj = {
        "kind": resource.kind,
        "apiVersion": resource.group_version,
        "metadata": {"resourceVersion": str(rv)},
    }
    return b'{"type":"BOOKMARK","object":' + dumps(obj) + b"}\n"


class WatchStream:
    """Buffers the lines of one watch between the store (sync) and the HTTP writer (async)."""

    def __init__(
        self,
        store: Store,
        resource: Resource,
        flt: WatchFilter,
        encode: Callable[[str, Stored], bytes] = event_line,
    ) -> None:
        self.store = store
        self.encode = encode
        self.resource = resource
        self.flt = flt
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.watcher = Watcher(resource.key, self._deliver)

    def _deliver(self, change: Change) -> None:
        type_ = translate(change, self.flt)
        if type_ is not None:
            self.queue.put_nowait(self.encode(type_, change.new))

    def start(self, rv: str | None) -> None:
        """Queue the initial events, then subscribe (no await in between: nothing is missed)."""
        if rv and rv != "0":
            for change in self.store.changes_since(self.resource.key, int(rv)):
                self._deliver(change)
        else:
            for stored in sorted(
                self.store.items(self.resource.key, self.flt.namespace),
                key=lambda s: (s.namespace, s.name),
            ):
                if self.flt.matches(stored):
                    self.queue.put_nowait(self.encode("ADDED", stored))
        self.store.add_watcher(self.watcher)

    def stop(self) -> None:
        self.store.remove_watcher(self.watcher)
