"""A fake clock for the moves and a helper that runs a job for a while on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from cluster.apply import admit
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from jobs.states import Moves, transition
from tenants.models import Team
from tests.conftest import spec


class FakeClock:
    """`timezone.now()` for the moves: it stands still until the test moves it."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def set(self, moment: datetime) -> None:
        self.now = moment


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timezone, "now", fake)
    return fake


def start(job: Job, clock: FakeClock, running_after: float = 5) -> None:
    """Admit `job` (as the controller does) now, and have it running `running_after` s on."""
    moves = Moves()
    admit(job, {"node-1": job.total_gpus}, moves)
    moves.flush()
    clock.advance(running_after)
    transition(job, State.RUNNING, "pod running")


def ran(
    team: Team,
    owner: User,
    clock: FakeClock,
    begin: datetime,
    end: datetime,
    *,
    gpus: int = 1,
    queue: str = "normal",
    ends_in: str = State.SUCCEEDED,
    reason: str = "completed",
) -> Job:
    """A job of `owner` in `team` that held `gpus` GPUs from `begin` to `end`."""
    job = submit_job(
        team,
        parse_spec(spec(team=team.slug, gpus_per_node=gpus, queue=queue)),
        acting_user=owner,
    )
    clock.set(begin)
    start(job, clock, running_after=0)
    clock.set(end)
    transition(job, ends_in, reason)
    return job
