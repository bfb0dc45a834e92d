"""Small builders for scheduler snapshots, so each test states only what it is about."""

from __future__ import annotations

from collections.abc import Iterable

from scheduler import (
    JobRequest,
    MemberCap,
    NodeState,
    PolicyConfig,
    QuotaInfo,
    RunningJob,
    Snapshot,
    TeamInfo,
)

NOW = 1_000_000.0
GPU = "h100-80g"


def job(
    job_id: int,
    team: str = "alice-lab",
    *,
    nodes: int = 1,
    gpus: int = 1,
    gpu_type: str = GPU,
    member: str | None = None,
    submit: float = NOW - 100,
    limit: float = 3600.0,
    priority: int = 0,
    preemptible: bool = True,
) -> JobRequest:
    return JobRequest(
        id=job_id,
        team=team,
        member=member or f"{team}-owner",
        gpu_type=gpu_type,
        nodes=nodes,
        gpus_per_node=gpus,
        submit_time=submit,
        runtime_limit_s=limit,
        priority=priority,
        preemptible=preemptible,
    )


def running(
    request: JobRequest, placement: dict[str, int], *, started: float = NOW - 50
) -> RunningJob:
    return RunningJob(request, started, tuple(sorted(placement.items())))


def node(
    name: str,
    free: int,
    *,
    total: int = 8,
    gpu_type: str = GPU,
    rack: str = "",
    cordoned: bool = False,
    ready: bool = True,
) -> NodeState:
    labels = {"rack": rack} if rack else {}
    return NodeState(name, gpu_type, total, free, labels, cordoned, ready)


def quota(team: str, guaranteed: int, limit: int, gpu_type: str = GPU) -> QuotaInfo:
    return QuotaInfo(team, gpu_type, guaranteed, limit)


def snapshot(
    queued: Iterable[JobRequest] = (),
    running_jobs: Iterable[RunningJob] = (),
    nodes: Iterable[NodeState] = (),
    quotas: Iterable[QuotaInfo] = (),
    teams: Iterable[TeamInfo] = (),
    caps: Iterable[MemberCap] = (),
    past_usage: dict[str, float] | None = None,
    now: float = NOW,
) -> Snapshot:
    quota_list = tuple(quotas)
    team_list = tuple(teams) or tuple(TeamInfo(t) for t in sorted({q.team for q in quota_list}))
    return Snapshot(
        now=now,
        queued=tuple(queued),
        running=tuple(running_jobs),
        nodes=tuple(nodes),
        teams=team_list,
        quotas=quota_list,
        member_caps=tuple(caps),
        past_usage=past_usage or {},
    )


def config(**overrides: object) -> PolicyConfig:
    return PolicyConfig(**overrides)  # type: ignore[arg-type]
