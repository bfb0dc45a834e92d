"""Garbage collection by ownerReferences, and the namespace controller.

Background deletion removes the owner at once and its dependents here; Foreground keeps the owner
(with the `foregroundDeletion` finalizer) until its dependents are gone; Orphan strips the owner
reference from dependents before the owner goes.
"""

from __future__ import annotations

from typing import Any

from kubesim.api import Api
from kubesim.errors import ApiError
from kubesim.resources import BY_KEY, NAMESPACE, RESOURCES, Resource
from kubesim.store import Stored

Obj = dict[str, Any]
FOREGROUND = "foregroundDeletion"
_BY_KIND = {(r.group_version, r.kind): r for r in RESOURCES}


class GarbageCollector:
    """Runs from the simulation's tick."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.gone: set[str] = set()  # uids deleted whose dependents need looking at
        self.foreground: set[tuple[str, str, str]] = set()
        self.namespaces: set[str] = set()
        api.store.listeners.append(self.on_change)
        api.on_delete = self.on_delete

    def on_change(self, resource: str, type_: str, new: Stored, old: Stored | None) -> None:
        meta = new.obj["metadata"]
        if type_ == "DELETED":
            self.gone.add(meta["uid"])
        elif FOREGROUND in (meta.get("finalizers") or ()):
            self.foreground.add((resource, new.namespace, new.name))
        if resource == NAMESPACE.key and type_ != "DELETED" and meta.get("deletionTimestamp"):
            self.namespaces.add(new.name)

    def on_delete(self, resource: Resource, stored: Stored, policy: str) -> None:
        if policy != "Orphan":
            return
        uid = stored.obj["metadata"]["uid"]
        for key, namespace, name in self.api.store.dependents_of(uid):
            dependent = self.api.store.get(key, namespace, name)
            if dependent is None:
                continue
            obj = dependent.thaw()
            refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r["uid"] != uid]
            obj["metadata"]["ownerReferences"] = refs
            if not refs:
                del obj["metadata"]["ownerReferences"]
            self.api.commit(BY_KEY[key], dependent, obj, "*")

    def _owner_alive(self, ref: Obj, namespace: str) -> bool:
        resource = _BY_KIND.get((ref.get("apiVersion", ""), ref.get("kind", "")))
        if resource is None:
            return True
        stored = self.api.store.get(
            resource.key, namespace if resource.namespaced else "", ref["name"]
        )
        return stored is not None and stored.obj["metadata"]["uid"] == ref["uid"]

    def _delete(self, key: str, namespace: str, name: str, policy: str) -> None:
        try:
            self.api.delete(BY_KEY[key], namespace, name, {"propagationPolicy": policy})
        except ApiError:
            return

    def run(self) -> None:
        gone, self.gone = self.gone, set()
        for uid in gone:
            for key, namespace, name in self.api.store.dependents_of(uid):
                stored = self.api.store.get(key, namespace, name)
                refs = stored.obj["metadata"].get("ownerReferences") or [] if stored else []
                if stored and not any(self._owner_alive(r, namespace) for r in refs):
                    self._delete(key, namespace, name, "Background")
        for item in sorted(self.foreground):
            self._finish_foreground(*item)
        for namespace in sorted(self.namespaces):
            self._empty_namespace(namespace)

    def _finish_foreground(self, key: str, namespace: str, name: str) -> None:
        stored = self.api.store.get(key, namespace, name)
        if stored is None:
            self.foreground.discard((key, namespace, name))
            return
        dependents = self.api.store.dependents_of(stored.obj["metadata"]["uid"])
        for dep_key, dep_ns, dep_name in dependents:
            dep = self.api.store.get(dep_key, dep_ns, dep_name)
            if dep is not None and not dep.obj["metadata"].get("deletionTimestamp"):
                self._delete(dep_key, dep_ns, dep_name, "Foreground")
        if not dependents:
            self.foreground.discard((key, namespace, name))
            obj = stored.thaw()
            obj["metadata"]["finalizers"] = [
                f for f in obj["metadata"]["finalizers"] if f != FOREGROUND
            ]
            self.api.commit(BY_KEY[key], stored, obj, "*")

    def _empty_namespace(self, namespace: str) -> None:
        remaining = 0
        for resource in RESOURCES:
            if not resource.namespaced:
                continue
            for stored in list(self.api.store.items(resource.key, namespace)):
                remaining += 1
                if not stored.obj["metadata"].get("deletionTimestamp"):
                    self._delete(resource.key, namespace, stored.name, "Background")
        ns = self.api.store.get(NAMESPACE.key, "", namespace)
        if remaining == 0 and ns is not None:
            self.namespaces.discard(namespace)
            self.api.store.remove(NAMESPACE.key, "", namespace)
