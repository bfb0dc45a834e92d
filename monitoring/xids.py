"""Xid events: stored on the GPU and its node; fatal codes take the GPU out of service."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from base.streams import CLUSTER_GROUP, XidMessage
from cluster.models import Gpu
from monitoring.catalog import GPU_OUT, XIDS, Action, classify_xid
from monitoring.models import XidEvent

# Xids after which the GPU needs a reset, a reboot or a replacement (monitoring.catalog): the GPU
# leaves the scheduler's capacity at once; the controller's fault loop does the rest.
FATAL_XIDS = frozenset(xid for xid, (action, _) in XIDS.items() if action in GPU_OUT)


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
            action=classify_xid(x["xid"]),
            # Nothing for the fault loop to do: handled as it arrives.
            handled_at=timezone.now() if classify_xid(x["xid"]) == Action.NONE else None,
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
