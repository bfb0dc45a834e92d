"""Object metadata and condition helpers shared by the API layer and the controllers."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from kubesim.clock import rfc3339

Obj = dict[str, Any]

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what the API server uses for generateName


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def stamp_new(obj: Obj, now: float) -> None:
    """Server-set metadata of a freshly created object."""
    meta = obj.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + random_suffix()
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = rfc3339(now)
    meta.pop("deletionTimestamp", None)
    meta.pop("deletionGracePeriodSeconds", None)
    meta.pop("resourceVersion", None)
    meta.pop("selfLink", None)


def owner_ref(owner: Obj, api_version: str, kind: str) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def set_condition(
    conditions: list[Obj], ctype: str, status: str, now: float, reason: str = "", message: str = ""
) -> list[Obj]:
    """Set a condition in place; lastTransitionTime changes only when the status does."""
    stamp = rfc3339(now)
    for cond in conditions:
        if cond["type"] == ctype:
            if cond["status"] != status:
                cond["lastTransitionTime"] = stamp
            cond.update(status=status, reason=reason, message=message)
            if "lastProbeTime" in cond:
                cond["lastProbeTime"] = stamp
            return conditions
    new: Obj = {"type": ctype, "status": status, "lastTransitionTime": stamp}
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    conditions.append(new)
    return conditions


def controller_uid(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref["uid"])
    return None
