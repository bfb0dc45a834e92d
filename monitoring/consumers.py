"""`/ws/cluster/`: every node's GPUs and Xid events, for platform admins only."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied

from jobs.consumers import TenantConsumer
from jobs.streams import CLUSTER_GROUP


class ClusterConsumer(TenantConsumer):
    def authorised_groups(self, user: Any) -> list[str]:
        if not user.is_staff:
            raise PermissionDenied("The cluster view is for platform admins.")
        return [CLUSTER_GROUP]
