"""Xid events: stored on the GPU and its node; fatal codes take the GPU out of service."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from base.streams import CLUSTER_GROUP, XidMessage
from cluster.models import Gpu
from monitoring.models import XidEvent

# Xids after which the GPU needs a reset or a replacement (NVIDIA's Xid catalogue): 48 double-bit
# ECC, 74 NVLink error, 79 fallen off the bus, 94/95 contained/uncontained ECC error.
FATAL_XIDS = frozenset({48, 74, 79, 94, 95})


def store_xids(
    node_id: int, node: str, gpu_ids: dict[int, int], xids: list[dict[str, Any]]
) -> list[tuple[str, XidMessage]]:
    """Store the events, update the GPUs, and return the admins' messages to send."""
    if not xids:
        return []
    events = [
        XidEvent(
            node_id=node_id,
            gpu_id=gpu_ids[x["index"]],
            xid=x["xid"],
            fatal=x["xid"] in FATAL_XIDS,
            at=datetime.fromtimestamp(x["at"], tz=UTC),
        )
        for x in xids
    ]
    XidEvent.objects.bulk_create(events)
    last = {e.gpu_id: e for e in events}  # oldest first, so the newest per GPU wins
    for gpu_id, event in last.items():
        changes: dict[str, Any] = {"last_xid": event.xid}
        if any(e.fatal for e in events if e.gpu_id == gpu_id):
            changes["healthy"] = False
        Gpu.objects.filter(pk=gpu_id).update(**changes)
    return [
        (
            CLUSTER_GROUP,
            {
                "type": "cluster.xid",
                "node": node,
                "index": x["index"],
                "xid": x["xid"],
                "fatal": x["xid"] in FATAL_XIDS,
                "at": x["at"],
            },
        )
        for x in xids
    ]
