"""The verbs (get, list, create, update, patch, delete, deletecollection) over the store.

HTTP handlers and the simulated controllers both go through here, so a pod the job controller
creates meets the same admission (quota!) as one a client posts.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesim import errors
from kubesim.admission import admit_create
from kubesim.clock import Clock, rfc3339
from kubesim.meta import stamp_new
from kubesim.patch import apply_patch
from kubesim.quota import NamespaceUsage
from kubesim.resources import JOB, NAMESPACE, POD, Resource
from kubesim.selectors import FieldSelector, Requirement, fields_match, labels_match
from kubesim.store import Store, Stored

Obj = dict[str, Any]

_IMMUTABLE_META = ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp")


@dataclass
class ListResult:
    items: list[Stored]
    rv: int
    continue_token: str
    remaining: int | None


def _encode_continue(rv: int, key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[str, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return data["start"][0], data["start"][1]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise errors.bad_request("continue key is not valid") from exc


class Api:
    """Verbs with Kubernetes semantics; `on_write` lets the simulation react (kick controllers)."""

    def __init__(self, store: Store, clock: Clock, toleration_seconds: int) -> None:
        self.store = store
        self.clock = clock
        self.toleration_seconds = toleration_seconds
        self.usage = NamespaceUsage(store)
        self.on_delete: Callable[[Resource, Stored, str], None] = lambda r, s, p: None

    def get(self, r: Resource, ns: str, name: str) -> Stored:
        stored = self.store.get(r.key, ns, name)
        if stored is None:
            raise errors.not_found(r.plural, r.group, name)
        return stored

    def list_objects(
        self,
        r: Resource,
        ns: str | None,
        labels: list[Requirement],
        fields: FieldSelector,
        limit: int = 0,
        continue_token: str = "",
    ) -> ListResult:
        start = _decode_continue(continue_token) if continue_token else None
        found = [
            s
            for s in self.store.items(r.key, ns)
            if (not labels or labels_match(labels, s.obj))
            and (not fields or fields_match(fields, s.obj))
        ]
        found.sort(key=lambda s: (s.namespace, s.name))
        if start is not None:
            found = [s for s in found if (s.namespace, s.name) > start]
        if limit and len(found) > limit:
            page, rest = found[:limit], len(found) - limit
            last = page[-1]
            token = _encode_continue(self.store.rv, (last.namespace, last.name))
            return ListResult(page, self.store.rv, token, rest)
        return ListResult(found, self.store.rv, "", None)

    def create(self, r: Resource, ns: str, obj: Obj) -> Stored:
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise errors.bad_request("the body of the request was not a valid object")
        obj.setdefault("metadata", {})
        obj["apiVersion"], obj["kind"] = r.group_version, r.kind
        if r.namespaced:
            body_ns = obj["metadata"].get("namespace")
            if body_ns and body_ns != ns:
                raise errors.bad_request(
                    "the namespace of the provided object does not match "
                    "the namespace sent on the request"
                )
            obj["metadata"]["namespace"] = ns
            self._check_namespace(ns)
        else:
            obj["metadata"].pop("namespace", None)
        stamp_new(obj, self.clock.now())
        name = obj["metadata"].get("name", "")
        if name and self.store.get(r.key, ns, name) is not None:
            raise errors.already_exists(r.plural, r.group, name)
        if "generation" in obj["metadata"] or r is JOB:
            obj["metadata"]["generation"] = 1
        admit_create(self.store, r, ns, obj, self.toleration_seconds, self.usage.of(ns))
        return self.store.put(r.key, obj, "ADDED")

    def _check_namespace(self, ns: str) -> None:
        stored = self.store.get(NAMESPACE.key, "", ns)
        if stored is None:
            raise errors.not_found("namespaces", "", ns)
        if stored.obj["metadata"].get("deletionTimestamp"):
            raise errors.ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {ns} because it is being terminated",
            )

    def update(self, r: Resource, ns: str, name: str, obj: Obj, sub: str = "") -> Stored:
        """PUT: 409 on a stale resourceVersion; status only through /status."""
        old = self.get(r, ns, name)
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise errors.bad_request("the body of the request was not a valid object")
        sent_rv = obj["metadata"].get("resourceVersion")
        if sent_rv and sent_rv != old.obj["metadata"]["resourceVersion"]:
            raise errors.conflict(r.plural, r.group, name)
        if obj["metadata"].get("name", name) != name:
            raise errors.bad_request("the name of the object does not match the name on the URL")
        return self.commit(r, old, obj, sub)

    def commit(self, r: Resource, old: Stored, obj: Obj, sub: str = "") -> Stored:
        """Write a changed copy of `old`, keeping what the caller may not change.

        `sub` is "" for the main resource, "status" for /status, "*" for controllers (both).
        """
        prev = old.obj
        if sub == "status":  # the stored object with the status sent, nothing else of it
            status = obj.get("status", {})
            obj = old.thaw()
            obj["status"] = status
        obj["apiVersion"], obj["kind"] = r.group_version, r.kind
        for field in _IMMUTABLE_META:
            if field in prev["metadata"] and sub != "*":
                obj["metadata"][field] = prev["metadata"][field]
            elif sub != "*":
                obj["metadata"].pop(field, None)
        if sub not in ("*", "status") and "status" in r.subresources and "status" in prev:
            obj["status"] = prev["status"]
        meta = obj["metadata"]
        if "generation" in prev["metadata"]:
            bump = obj.get("spec") != prev.get("spec")
            meta["generation"] = prev["metadata"]["generation"] + (1 if bump else 0)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self.store.remove(r.key, old.namespace, old.name)
        return self.store.put(r.key, obj, "MODIFIED")

    def patch(
        self, r: Resource, ns: str, name: str, body: Any, ctype: str, sub: str = ""
    ) -> Stored:
        old = self.get(r, ns, name)
        patched = apply_patch(old.copy(), body, ctype)
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.bad_request("the patch removed the object's metadata")
        sent_rv = patched["metadata"].get("resourceVersion")
        if sent_rv and sent_rv != old.obj["metadata"]["resourceVersion"]:
            raise errors.conflict(r.plural, r.group, name)
        return self.commit(r, old, patched, sub)

    def delete(self, r: Resource, ns: str, name: str, options: Obj) -> tuple[Stored, bool]:
        """Returns the object and whether it is still there (graceful or finalizers pending)."""
        stored = self.get(r, ns, name)
        self._check_preconditions(r, stored, options.get("preconditions") or {})
        policy = options.get("propagationPolicy") or self._default_policy(r, options)
        if policy not in ("Orphan", "Background", "Foreground"):
            raise errors.invalid(
                "DeleteOptions",
                "",
                "",
                [
                    (
                        "FieldValueNotSupported",
                        "propagationPolicy",
                        f'Unsupported value: "{policy}": supported values: "Foreground", '
                        '"Background", '
                        '"Orphan", "nil"',
                    )
                ],
            )
        grace = options.get("gracePeriodSeconds")
        meta = stored.obj["metadata"]
        if meta.get("deletionTimestamp") and not (r is POD and grace == 0):
            return stored, True
        if r is POD and grace != 0 and self._pod_needs_kubelet(stored.obj):
            return self._mark_deleting(stored, r, grace, []), True
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Foreground" and self.store.dependents_of(meta["uid"]):
            finalizers.append("foregroundDeletion")
        if r is NAMESPACE or finalizers:
            return self._mark_deleting(stored, r, None, finalizers), True
        self.on_delete(r, stored, policy)
        return self.store.remove(r.key, ns, name), False

    def _mark_deleting(
        self, stored: Stored, r: Resource, grace: int | None, finalizers: list[str]
    ) -> Stored:
        obj = stored.thaw()
        meta = obj["metadata"]
        if r is POD:
            seconds = (
                grace if grace is not None else obj["spec"].get("terminationGracePeriodSeconds", 30)
            )
            meta["deletionGracePeriodSeconds"] = seconds
            meta["deletionTimestamp"] = rfc3339(self.clock.now() + seconds)
        else:
            meta["deletionTimestamp"] = rfc3339(self.clock.now())
            meta["deletionGracePeriodSeconds"] = 0
        if finalizers:
            meta["finalizers"] = finalizers
        if r is NAMESPACE:
            obj["status"] = {"phase": "Terminating"}
        return self.store.put(r.key, obj, "MODIFIED")

    @staticmethod
    def _pod_needs_kubelet(pod: Obj) -> bool:
        phase = pod.get("status", {}).get("phase")
        return bool(pod["spec"].get("nodeName")) and phase not in ("Succeeded", "Failed")

    @staticmethod
    def _default_policy(r: Resource, options: Obj) -> str:
        if options.get("orphanDependents") is True:
            return "Orphan"
        if options.get("orphanDependents") is False:
            return "Background"
        # batch/v1 Jobs orphan their pods unless told otherwise, as the real REST strategy does.
        return "Orphan" if r is JOB else "Background"

    @staticmethod
    def _check_preconditions(r: Resource, stored: Stored, pre: Obj) -> None:
        meta = stored.obj["metadata"]
        if (pre.get("uid") and pre["uid"] != meta["uid"]) or (
            pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]
        ):
            raise errors.conflict(r.plural, r.group, stored.name)
