"""The object store: one global resourceVersion, a bounded event history and live watchers.

Stored objects are immutable dicts; each keeps its JSON once serialised, so lists and watch
fan-out join cached bytes instead of re-encoding. Callers that want to change an object take a
`thaw()` (new dicts down to the parts they change, the rest shared with the stored version) or a
`copy()` (a JSON round trip, for changes anywhere) and commit it through the API.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson

from kubesim.errors import expired

Obj = dict[str, Any]
Listener = Callable[[str, str, "Stored", "Stored | None"], None]


def dumps(obj: Any) -> bytes:
    """Compact JSON, as the API server writes it. Encoding every object a controller touches
    and every watch event was the simulator's largest cost with the standard library's encoder."""
    return orjson.dumps(obj)


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars), several times faster than deepcopy."""
    if type(value) is dict:
        return {k: json_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [json_copy(v) for v in value]
    return value


def _owners(stored: Stored) -> Any:
    return stored.obj["metadata"].get("ownerReferences")


@lru_cache(maxsize=256)
def _key(name: str, first: bool) -> bytes:
    """`"name":` as JSON writes an object's key, after a comma unless it comes first."""
    return (b"" if first else b",") + dumps(name) + b":"


Spans = dict[str, tuple[int, int]]


def _encode(obj: Obj, previous: Stored | None) -> tuple[bytes, Spans]:
    """`dumps(obj)`, copying the bytes of top-level values shared with the previous version.

    Controllers change a copy that shares what they left alone (see `thaw`): a Job's status
    update re-encodes its status and metadata, not its spec. Returns where each dict or list
    value lies in the result, for the next version to copy in turn.
    """
    pieces, spans, size = [b"{"], {}, 1
    for name, value in obj.items():
        head = _key(name, len(pieces) == 1)
        piece = previous.encoded_part(name, value) if previous is not None else None
        if piece is None:
            piece = dumps(value)
        if isinstance(value, (dict, list)):
            spans[name] = (size + len(head), size + len(head) + len(piece))
        pieces += (head, piece)
        size += len(head) + len(piece)
    pieces.append(b"}")
    return b"".join(pieces), spans


class Stored:
    """An object as committed at one resourceVersion, with its serialised form cached."""

    __slots__ = ("_previous", "_raw", "_spans", "obj")

    def __init__(self, obj: Obj, previous: Stored | None = None) -> None:
        self.obj = obj
        self._raw: bytes | None = None
        self._spans: Spans | None = None
        self._previous = previous  # to encode from, until `raw` is first asked for
        if previous is not None:
            previous._previous = None  # so no chain of old versions is kept alive

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            previous, self._previous = self._previous, None
            self._raw, self._spans = _encode(self.obj, previous)
            if previous is not None:
                previous._spans = None  # only the newest encoded version keeps its spans
        return self._raw

    def encoded_part(self, name: str, value: Any) -> bytes | None:
        """The JSON of top-level field `name`, if this version holds `value` itself there."""
        spans, raw = self._spans, self._raw
        if spans is None or raw is None or self.obj.get(name) is not value or name not in spans:
            return None
        start, end = spans[name]
        return raw[start:end]

    def copy(self) -> Obj:
        result: Obj = orjson.loads(self.raw)
        return result

    def thaw(self, *parts: str) -> Obj:
        """A copy to change and commit, far cheaper than `copy()`.

        The object and its `metadata` are new dicts (so top-level fields of both may be set);
        the top-level `parts` named (e.g. "status") are deep copies, free to change anywhere.
        Everything else is shared with this version and must not be changed in place.
        """
        obj = dict(self.obj)
        obj["metadata"] = dict(obj["metadata"])
        for part in parts:
            if part in obj:
                obj[part] = json_copy(obj[part])
        return obj

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace", ""))

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


@dataclass
class Change:
    """One committed change, as history keeps it for watches that resume from a version."""

    rv: int
    resource: str
    type: str
    new: Stored
    old: Stored | None


@dataclass(eq=False)
class Watcher:
    """A live watch: `deliver` is called synchronously for every change of its resource."""

    resource: str
    deliver: Callable[[Change], None]


@dataclass
class Store:
    """All objects by resource key, namespace and name."""

    history_size: int = 20000
    rv: int = 1
    data: dict[str, dict[str, dict[str, Stored]]] = field(default_factory=dict)
    history: deque[Change] = field(default_factory=deque)
    watchers: dict[str, set[Watcher]] = field(default_factory=dict)
    listeners: list[Listener] = field(default_factory=list)
    dependents: dict[str, set[tuple[str, str, str]]] = field(default_factory=dict)

    def get(self, resource: str, namespace: str, name: str) -> Stored | None:
        return self.data.get(resource, {}).get(namespace, {}).get(name)

    def items(self, resource: str, namespace: str | None = None) -> Iterator[Stored]:
        by_ns = self.data.get(resource, {})
        if namespace is not None:
            yield from by_ns.get(namespace, {}).values()
            return
        for objects in by_ns.values():
            yield from objects.values()

    def count(self, resource: str) -> int:
        return sum(len(objs) for objs in self.data.get(resource, {}).values())

    def put(self, resource: str, obj: Obj, type_: str) -> Stored:
        """Commit a create or update: stamps the next resourceVersion."""
        meta = obj["metadata"]
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        namespace = meta.get("namespace", "")
        bucket = self.data.setdefault(resource, {}).setdefault(namespace, {})
        old = bucket.get(meta["name"])
        stored = Stored(obj, old)
        bucket[meta["name"]] = stored
        self._index_owners(resource, stored, old)
        self._publish(Change(self.rv, resource, type_, stored, old))
        return stored

    def remove(self, resource: str, namespace: str, name: str) -> Stored:
        """Delete for good; the DELETED event carries the last state at a new resourceVersion."""
        bucket = self.data[resource][namespace]
        old = bucket.pop(name)
        if not bucket:
            del self.data[resource][namespace]
        obj = old.thaw()
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        gone = Stored(obj, old)
        self._index_owners(resource, None, old)
        self._publish(Change(self.rv, resource, "DELETED", gone, old))
        return gone

    def dependents_of(self, uid: str) -> list[tuple[str, str, str]]:
        return sorted(self.dependents.get(uid, ()))

    def _index_owners(self, resource: str, new: Stored | None, old: Stored | None) -> None:
        if new is not None and old is not None and _owners(new) == _owners(old):
            return  # an update of the same object that left its owners as they were
        for stored, add in ((old, False), (new, True)):
            if stored is None:
                continue
            key = (resource, stored.namespace, stored.name)
            for ref in stored.obj["metadata"].get("ownerReferences") or ():
                owners = self.dependents.setdefault(ref["uid"], set())
                if add:
                    owners.add(key)
                else:
                    owners.discard(key)
                    if not owners:
                        del self.dependents[ref["uid"]]

    def _publish(self, change: Change) -> None:
        self.history.append(change)
        if len(self.history) > self.history_size:
            self.history.popleft()
        for listener in self.listeners:
            listener(change.resource, change.type, change.new, change.old)
        for watcher in list(self.watchers.get(change.resource, ())):
            watcher.deliver(change)

    def changes_since(self, resource: str, rv: int) -> list[Change]:
        """History after `rv`, or 410 Expired when it has been compacted away."""
        oldest = self.history[0].rv if self.history else self.rv + 1
        if rv < oldest - 1 and rv < self.rv:
            raise expired(f"too old resource version: {rv} ({oldest - 1})")
        return [c for c in self.history if c.rv > rv and c.resource == resource]

    def add_watcher(self, watcher: Watcher) -> None:
        self.watchers.setdefault(watcher.resource, set()).add(watcher)

    def remove_watcher(self, watcher: Watcher) -> None:
        self.watchers.get(watcher.resource, set()).discard(watcher)
