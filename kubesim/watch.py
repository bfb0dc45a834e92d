"""Watch streams: initial state or history replay, then live changes, filtered by selector.

An object that starts or stops matching the selector arrives as ADDED or DELETED, as from the
real watch cache. Bookmarks carry only kind, apiVersion and metadata.resourceVersion; the one that
ends a streaming list's initial events is annotated `k8s.io/initial-events-end: "true"`, which
client-go's reflector (kubectl wait, informers) waits for before it trusts its cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from kubesim.resources import Resource
from kubesim.selectors import FieldSelector, Requirement, fields_match, labels_match
from kubesim.store import Change, Store, Stored, Watcher, dumps

BOOKMARK_INTERVAL_S = 5.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


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


def bookmark(resource: Resource, rv: int, initial_events_end: bool = False) -> bytes:
    metadata: dict[str, object] = {"resourceVersion": str(rv)}
    if initial_events_end:
        metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
    obj = {"kind": resource.kind, "apiVersion": resource.group_version, "metadata": metadata}
    return b'{"type":"BOOKMARK","object":' + dumps(obj) + b"}\n"


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


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
        self.lines: list[bytes] = []
        self.watcher = Watcher(resource.key, self._deliver)
        self._waiter: asyncio.Future[None] | None = None

    def _deliver(self, change: Change) -> None:
        type_ = translate(change, self.flt)
        if type_ is not None:
            self._put(self.encode(type_, change.new))

    def _put(self, line: bytes) -> None:
        self.lines.append(line)
        if self._waiter is not None:
            _wake(self._waiter)

    async def next_chunk(self, timeout: float) -> bytes:
        """The lines that arrived, waiting up to `timeout` for one; b"" if none came.

        After a wait, what else is ready to run first adds its lines too (the controllers' tick
        that a write kicked): a burst of changes costs one write, not one per change.
        """
        if not self.lines:
            await self._arrival(timeout)
            if not self.lines:
                return b""
            await asyncio.sleep(0)
        chunk = b"".join(self.lines)
        self.lines.clear()
        return chunk

    async def _arrival(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = loop.call_later(max(timeout, 0.0), _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def start(self, rv: str | None, initial: bool, end_bookmark: bool = False) -> None:
        """Queue the initial events, then subscribe (no await in between: nothing is missed).

        `initial`: ADDED for every current object (then, with `end_bookmark`, the bookmark that
        ends them); otherwise the changes after `rv`, or none when the watch starts now.
        """
        if initial:
            for stored in sorted(
                self.store.items(self.resource.key, self.flt.namespace),
                key=lambda s: (s.namespace, s.name),
            ):
                if self.flt.matches(stored):
                    self._put(self.encode("ADDED", stored))
            if end_bookmark:
                self._put(bookmark(self.resource, self.store.rv, initial_events_end=True))
        elif rv and rv != "0":
            for change in self.store.changes_since(self.resource.key, int(rv)):
                self._deliver(change)
        self.store.add_watcher(self.watcher)

    def stop(self) -> None:
        self.store.remove_watcher(self.watcher)
