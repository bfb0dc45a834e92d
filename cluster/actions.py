"""Node actions: cordon and uncordon, audited with their reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils.translation import gettext as _

from audit.record import record
from base.errors import FieldErrors
from cluster.backend import ClusterBackend
from cluster.models import Node

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_REASON = 255


def set_cordon(
    node: Node, cordon: bool, *, reason: str, acting_user: User | None, backend: ClusterBackend
) -> Node:
    """Cordon (no new pods) or uncordon a node in the cluster, then record it."""
    reason = reason.strip()
    if cordon and not reason:
        raise FieldErrors({"reason": _("is required to cordon a node")})
    if len(reason) > MAX_REASON:
        message = _("must be at most %(most)d characters")
        raise FieldErrors({"reason": message % {"most": MAX_REASON}})
    backend.set_unschedulable(node.name, cordon)
    with transaction.atomic():
        before = {"cordoned": node.cordoned, "reason": node.cordon_reason}
        node.cordoned, node.cordon_reason = cordon, reason if cordon else ""
        node.save(update_fields=["cordoned", "cordon_reason", "updated_at"])
        record(
            "node.cordon" if cordon else "node.uncordon",
            actor=acting_user,
            team=None,
            target=node,
            before=before,
            after={"cordoned": cordon, "reason": reason},
        )
    return node
