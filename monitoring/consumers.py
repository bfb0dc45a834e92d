"""Websocket streams that need what the cluster records: a job's status, logs and GPU metrics;
every node's GPUs and Xid events (platform admins)."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.core.exceptions import PermissionDenied
from django.utils import timezone
from django.utils.translation import gettext as _

from base.consumers import TenantConsumer
from base.delivery import Delivery
from base.streams import CLUSTER_GROUP, job_group
from jobs.access import access_job
from jobs.consumers import ReadersLanguage
from jobs.models import Job
from jobs.streams import status_message
from monitoring.replay import LogReplay


class JobConsumer(ReadersLanguage):
    """`/ws/jobs/<id>/[?after=<chunk id>]`: the job's status, log chunks and GPU metrics.

    With `after`, every persisted chunk past it is replayed first (a reconnecting browser sends
    the last chunk id it saw); without, the last few chunks are.
    """

    replay: LogReplay

    def authorised_groups(self, user: Any) -> list[str]:
        job = access_job(user, self.scope["url_route"]["kwargs"]["job_id"])
        self.replay = LogReplay(job, self.query_param("after"))
        return [job_group(job.team_id, job.pk)]

    def make_delivery(self) -> Delivery:
        return Delivery(self.send_json, self.replay.fill_gap)

    async def write(self) -> None:
        # The page was rendered before this socket joined the group: a change in between would
        # otherwise never reach it, so the state as it is now goes first.
        self.delivery.put(await database_sync_to_async(self.current_status)())
        await self.replay.run(self.delivery)
        await self.delivery.run()

    def current_status(self) -> dict[str, Any]:
        job = Job.unscoped.select_related("team", "owner", "queue", "gpu_type").get(
            pk=self.replay.job.pk
        )
        return dict(status_message(job, timezone.now().isoformat()))


class ClusterConsumer(TenantConsumer):
    """`/ws/cluster/`: every node's GPUs and Xid events, for platform admins only."""

    def authorised_groups(self, user: Any) -> list[str]:
        if not user.is_staff:
            raise PermissionDenied(_("The cluster view is for platform admins."))
        return [CLUSTER_GROUP]
