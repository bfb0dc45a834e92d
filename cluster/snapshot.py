"""Build the scheduler's snapshot from the database: the portal's records are the truth.

Free GPUs per node are the node's allocatable GPUs minus what the portal has placed there
(admitted and running jobs), so a job admitted a moment ago counts before its pods exist.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from cluster.models import Node
from jobs.models import HOLDING_STATES, Job, State
from quotas.models import MemberCap, Quota
from scheduler import (
    JobRequest,
    NodeState,
    PolicyConfig,
    QuotaInfo,
    RunningJob,
    Snapshot,
    TeamInfo,
)
from scheduler import MemberCap as CapInfo
from tenants.models import Team


def _ts(moment: datetime | None) -> float:
    return moment.timestamp() if moment else 0.0


# Read as plain rows: building a model instance (and its four related ones) per job was most of
# a cycle's cost once thousands of jobs wait.
_REQUEST = (
    "id",
    "team__slug",
    "owner__username",
    "gpu_type__name",
    "nodes",
    "gpus_per_node",
    "submitted_at",
    "max_runtime",
    "queue__priority",
    "queue__preemptible",
)
_RUNNING = ("started_at", "admitted_at", "placement", "grace_until", "preempted_for_id")


def _request(row: tuple[Any, ...]) -> JobRequest:
    job_id, team, member, gpu_type, nodes, gpus, submitted, max_runtime, priority, preemptible = row
    return JobRequest(
        id=job_id,
        team=team,
        member=member,
        gpu_type=gpu_type,
        nodes=nodes,
        gpus_per_node=gpus,
        submit_time=_ts(submitted),
        runtime_limit_s=float(max_runtime),
        priority=priority,
        preemptible=preemptible,
    )


def _queued() -> list[JobRequest]:
    rows = Job.unscoped.filter(state=State.QUEUED).order_by("id").values_list(*_REQUEST)
    return [_request(row) for row in rows]


def _holding() -> list[RunningJob]:
    rows = (
        Job.unscoped.filter(state__in=HOLDING_STATES)
        .order_by("id")
        .values_list(*_REQUEST, *_RUNNING)
    )
    running = []
    for row in rows:
        started, admitted, placement, grace_until, preempted_for = row[len(_REQUEST) :]
        running.append(
            RunningJob(
                job=_request(row[: len(_REQUEST)]),
                start_time=_ts(started or admitted),
                placement=tuple(sorted((node, int(gpus)) for node, gpus in placement.items())),
                grace_until=_ts(grace_until) if grace_until else None,
                preempted_for=preempted_for,
            )
        )
    return running


def _nodes(holding: list[RunningJob]) -> tuple[NodeState, ...]:
    used: dict[str, int] = defaultdict(int)
    for job in holding:
        for node, gpus in job.placement:
            used[node] += gpus
    return tuple(
        NodeState(
            name=node.name,
            gpu_type=node.gpu_type.name,  # type: ignore[union-attr]
            total_gpus=node.gpu_allocatable,
            free_gpus=max(0, node.gpu_allocatable - used[node.name]),
            labels={"rack": node.rack, "nvlink_domain": node.nvlink_domain},
            cordoned=node.cordoned,
            ready=node.ready,
        )
        for node in Node.objects.filter(gpu_type__isnull=False).select_related("gpu_type")
    )


def past_usage(config: PolicyConfig, now: datetime) -> dict[str, float]:
    """GPU-seconds per team, each job's share halved every `fair_half_life_s` since it ended."""
    horizon = now - timedelta(seconds=4 * config.fair_half_life_s)
    usage: dict[str, float] = defaultdict(float)
    rows = (
        Job.unscoped.filter(finished_at__gte=horizon, started_at__isnull=False)
        .values_list("team__slug", "nodes", "gpus_per_node", "started_at", "finished_at")
        .iterator(chunk_size=5000)
    )
    for team, nodes, gpus, started, finished in rows:
        assert started is not None and finished is not None  # filtered above
        age = (now - finished).total_seconds()
        seconds = (finished - started).total_seconds() * nodes * gpus
        usage[team] += seconds * math.pow(0.5, age / config.fair_half_life_s)
    return dict(usage)


def build_snapshot(now: datetime, usage: dict[str, float]) -> Snapshot:
    holding = _holding()
    teams = [
        TeamInfo(
            name=t.slug, department=t.parent.slug if t.parent else None, weight=t.fair_share_weight
        )
        for t in Team.objects.select_related("parent")
    ]
    quotas = [
        QuotaInfo(
            team=q.team.slug, gpu_type=q.gpu_type.name, guaranteed=q.guaranteed, limit=q.limit
        )
        for q in Quota.unscoped.select_related("team", "gpu_type")
    ]
    caps = [
        CapInfo(team=c.team.slug, member=c.user.get_username(), max_gpus=c.max_gpus)
        for c in MemberCap.unscoped.select_related("team", "user")
    ]
    return Snapshot(
        now=now.timestamp(),
        queued=tuple(_queued()),
        running=tuple(holding),
        nodes=_nodes(holding),
        teams=tuple(teams),
        quotas=tuple(quotas),
        member_caps=tuple(caps),
        past_usage=usage,
    )
