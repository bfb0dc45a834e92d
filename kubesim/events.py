"""Core v1 Events, aggregated the way the real event recorder does (same reason and message bump
`count` and `lastTimestamp` instead of creating a new object)."""

from __future__ import annotations

import secrets
from typing import Any

from kubesim.api import Api
from kubesim.clock import rfc3339
from kubesim.errors import ApiError
from kubesim.resources import EVENT

Obj = dict[str, Any]


class EventRecorder:
    """Writes Events about objects on behalf of a named component."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self._seen: dict[tuple[str, str, str], str] = {}

    def record(
        self,
        obj: Obj,
        reason: str,
        message: str,
        component: str,
        warning: bool = False,
        host: str = "",
    ) -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        key = (meta["uid"], reason, message)
        now = rfc3339(self.api.clock.now())
        existing = self._seen.get(key)
        stored = self.api.store.get(EVENT.key, namespace, existing) if existing else None
        if stored is not None:
            bumped = stored.thaw()
            bumped["count"] = bumped.get("count", 1) + 1
            bumped["lastTimestamp"] = now
            self.api.commit(EVENT, stored, bumped, "*")
            return
        name = f"{meta['name']}.{secrets.token_hex(8)}"
        source: Obj = {"component": component}
        if host:
            source["host"] = host
        event: Obj = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "kind": obj["kind"],
                "apiVersion": obj["apiVersion"],
                "name": meta["name"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion", ""),
                **({"namespace": meta["namespace"]} if meta.get("namespace") else {}),
            },
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": "Warning" if warning else "Normal",
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host,
        }
        try:
            self.api.create(EVENT, namespace, event)
        except ApiError:
            return  # namespace gone or terminating: the real recorder drops the event too
        self._seen[key] = name
