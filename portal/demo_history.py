"""The demo's past: finished jobs of the demo teams from the first day of last month until an
hour ago, each with its events and its usage segment, so that `/usage/` and last month's
statements have something to show on the first start.

Written as the jobs' own moves would have left them (a segment per run, its GPU-seconds the
run's GPUs times its length), at plausible sizes and lengths for the teams' quotas. The same
demo gets the same past (seeded by the month). Only `seed_demo` calls it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TypeVar

from django.contrib.auth.models import User
from django.utils import timezone

from billing.models import UsageSegment
from billing.rollup import add_to_days
from billing.segments import seconds_between
from jobs.models import Job, JobEvent, State
from quotas.models import GpuType, Queue
from tenants.models import Team

JOBS_PER_DAY = (2, 5)
"""Finished jobs a team starts on a day: from, to."""
GPUS = (1, 1, 2, 4, 8, 8, 16)
HOURS = (0.5, 24.0)
NAMES = {
    "vision": ("resnet-ablation", "vit-pretrain", "detr-sweep", "segformer-eval"),
    "nlp": ("llama-finetune", "tokenizer-train", "rlhf-reward", "eval-harness"),
}
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


@dataclass(frozen=True)
class Run:
    """One finished job of the past: who ran what, when, on how many GPUs."""

    team: Team
    owner: User
    queue: Queue
    gpu_type: GpuType
    name: str
    gpus: int
    submitted: datetime
    started: datetime
    ended: datetime
    state: str


def _runs(teams: dict[str, Team], owners: dict[str, list[User]], now: datetime) -> list[Run]:
    first = (now.replace(day=1) - timedelta(days=1)).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    rng = random.Random(first.strftime("%Y-%m"))
    types = list(GpuType.objects.order_by("name"))
    runs: list[Run] = []
    day = first
    while day < now - timedelta(days=1):
        for slug, team in teams.items():
            queues = list(Queue.objects.for_team(team).order_by("name"))
            for _ in range(rng.randint(*JOBS_PER_DAY)):
                submitted = day + timedelta(seconds=rng.uniform(0, 86400))
                started = submitted + timedelta(seconds=rng.uniform(5, 1800))
                ended = started + timedelta(hours=rng.uniform(*HOURS))
                if ended > now - timedelta(hours=1):
                    continue
                runs.append(
                    Run(
                        team,
                        rng.choice(owners[slug]),
                        rng.choice(queues),
                        rng.choice(types),
                        f"{rng.choice(NAMES[slug])}-{len(runs) + 1}",
                        rng.choice(GPUS),
                        submitted,
                        started,
                        ended,
                        State.SUCCEEDED if rng.random() < 0.9 else State.FAILED,
                    )
                )
        day += timedelta(days=1)
    return runs


def _job(run: Run) -> Job:
    nodes = max(1, run.gpus // 8)
    return Job(
        team=run.team,
        owner=run.owner,
        queue=run.queue,
        gpu_type=run.gpu_type,
        name=run.name,
        image=IMAGE,
        command=["python", "train.py"],
        gpus_per_node=run.gpus // nodes,
        nodes=nodes,
        cpu=Decimal(8),
        memory="64Gi",
        max_runtime=run.queue.max_runtime,
        state=run.state,
        state_reason="completed" if run.state == State.SUCCEEDED else "exit code 1",
        exit_code=0 if run.state == State.SUCCEEDED else 1,
        attempts=1,
        admitted_at=run.started,
        started_at=run.started,
        finished_at=run.ended,
        submitted_at=run.submitted,
    )


def _events(job: Job, run: Run) -> list[JobEvent]:
    moves = [
        ("", State.QUEUED, "submitted", run.submitted),
        (State.QUEUED, State.ADMITTED, "admitted", run.started),
        (State.ADMITTED, State.RUNNING, "pod running", run.started),
        (State.RUNNING, run.state, job.state_reason, run.ended),
    ]
    return [
        JobEvent(team=run.team, job=job, from_state=a, to_state=b, reason=why, at=at)
        for a, b, why, at in moves
    ]


def _segment(job: Job, run: Run) -> UsageSegment:
    return UsageSegment(
        team=run.team,
        job=job,
        user=run.owner,
        queue=run.queue,
        gpu_type=run.gpu_type,
        gpus=run.gpus,
        attempt=1,
        started_at=run.started,
        ended_at=run.ended,
        end_state=run.state,
        end_reason=job.state_reason,
        gpu_seconds=run.gpus * seconds_between(run.started, run.ended),
    )


Stamped = TypeVar("Stamped", Job, JobEvent)


def _create_stamped(model: type[Stamped], rows: list[Stamped], field: str) -> list[Stamped]:
    """bulk_create, then give `field` back the time each row had (`auto_now_add` stamps now)."""
    stamps = [getattr(row, field) for row in rows]
    created = model.unscoped.bulk_create(rows)
    for row, at in zip(created, stamps, strict=True):
        setattr(row, field, at)
    model.unscoped.bulk_update(created, [field], batch_size=500)
    return created


def seed_history(teams: dict[str, Team], owners: dict[str, list[User]]) -> int:
    """Write the demo teams' past jobs (`owners`: who may run a team's jobs, by slug);
    returns how many."""
    runs = _runs(teams, owners, timezone.now())
    jobs = _create_stamped(Job, [_job(run) for run in runs], "submitted_at")
    done = list(zip(jobs, runs, strict=True))
    _create_stamped(JobEvent, [event for job, run in done for event in _events(job, run)], "at")
    add_to_days(UsageSegment.unscoped.bulk_create([_segment(job, run) for job, run in done]))
    return len(jobs)
