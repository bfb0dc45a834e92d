"""The log writer stores each pod's lines once, in order, whoever hands them over and how often."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

import pytest

from cluster.backend import Unavailable
from cluster.logs import Finished, LogFollowers, LogWriter, Piece
from cluster.models import JobLogChunk
from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(world: World) -> Job:
    return submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)


def _piece(job: Job, first_line: int, *lines: str, pod: str = "train-0") -> Piece:
    return Piece(job.team_id, job.pk, pod, first_line, lines)


def _stored(job: Job, pod: str = "train-0") -> list[tuple[int, int, str]]:
    chunks = JobLogChunk.unscoped.filter(job=job, pod=pod).order_by("seq")
    return [(c.seq, c.first_line, c.text) for c in chunks]


def test_pieces_of_many_pods_are_numbered_per_pod(job: Job) -> None:
    LogWriter().write(
        [_piece(job, 1, "a", "b"), _piece(job, 1, "x", pod="train-1"), _piece(job, 3, "c")]
    )
    assert _stored(job) == [(1, 1, "a\nb"), (2, 3, "c")]
    assert _stored(job, "train-1") == [(1, 1, "x")]


def test_a_follower_started_again_stores_only_the_new_lines(job: Job) -> None:
    LogWriter().write([_piece(job, 1, "a", "b", "c")])
    # A new controller (nothing in memory) follows the same pod from the start again.
    again = LogWriter()
    again.write([_piece(job, 1, "a", "b"), _piece(job, 3, "c", "d"), _piece(job, 5, "e")])
    assert _stored(job) == [(1, 1, "a\nb\nc"), (2, 4, "d"), (3, 5, "e")]


def test_a_finished_pod_is_forgotten_and_read_back_when_it_returns(job: Job) -> None:
    writer = LogWriter()
    writer.write([_piece(job, 1, "a"), Finished((job.pk, "train-0"))])
    assert writer.stored == {}
    writer.write([_piece(job, 1, "a", "b")])
    assert _stored(job) == [(1, 1, "a"), (2, 2, "b")]


def test_a_failed_write_stores_nothing_and_the_retry_stores_it_all(
    job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import DatabaseError

    writer = LogWriter()
    writer.write([_piece(job, 1, "a")])

    def broken(*args: object, **kwargs: object) -> None:
        raise DatabaseError("connection lost")

    with monkeypatch.context() as patched:
        patched.setattr(JobLogChunk.unscoped, "bulk_create", broken)
        with pytest.raises(DatabaseError):
            writer.write([_piece(job, 2, "b")])
    writer.write([_piece(job, 2, "b")])
    assert _stored(job) == [(1, 1, "a"), (2, 2, "b")]


def test_a_nul_byte_is_stored_as_a_replacement_character(job: Job) -> None:
    LogWriter().write([_piece(job, 1, "before\x00after")])
    assert _stored(job) == [(1, 1, "before\ufffdafter")]


class _EndlessLogs:
    """A cluster whose pods each log one line and then run until `end` is set."""

    def __init__(self) -> None:
        self.end = threading.Event()

    async def follow_log(self, namespace: str, pod: str) -> AsyncIterator[str]:
        yield f"{pod} started"
        while not self.end.is_set():
            await asyncio.sleep(0.05)
        yield f"{pod} done"

    async def close_log_streams(self) -> None:
        pass


@pytest.mark.django_db(transaction=True)
def test_every_running_pod_is_followed_at_once(job: Job) -> None:
    cluster = _EndlessLogs()
    followers = LogFollowers(cluster)
    pods = [f"train-{i}" for i in range(100)]  # far more than a thread each would allow
    try:
        for pod in pods:
            followers.follow(job, "gpu-vision", pod)
        deadline = time.monotonic() + 20
        while JobLogChunk.unscoped.filter(job=job).count() < len(pods):
            assert time.monotonic() < deadline, "not every pod's first line was stored"
            time.sleep(0.1)
        assert len(followers.active) == len(pods)  # all still running, all followed
        cluster.end.set()
        while followers.active:
            assert time.monotonic() < deadline, "followers did not finish"
            time.sleep(0.1)
    finally:
        cluster.end.set()
        followers.shutdown()
    assert {c.text for c in JobLogChunk.unscoped.filter(job=job, first_line=1)} == {
        f"{pod} started" for pod in pods
    }


class _FlakyLogs:
    """A cluster whose API goes away after two lines of the log, then serves it whole."""

    def __init__(self) -> None:
        self.calls = 0

    async def follow_log(self, namespace: str, pod: str) -> AsyncIterator[str]:
        self.calls += 1
        for line in ("one", "two") if self.calls == 1 else ("one", "two", "three", "four"):
            yield line
            await asyncio.sleep(0)  # the follower's turn: each line its own piece (FLUSH_LINES)
        if self.calls == 1:
            raise Unavailable("cluster API: connection refused")

    async def close_log_streams(self) -> None:
        pass


@pytest.mark.django_db(transaction=True)
def test_a_log_cut_off_by_an_outage_is_read_again_without_gaps_or_repeats(
    job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cluster.logs.RETRY_START_S", 0.1)
    monkeypatch.setattr("cluster.logs.FLUSH_LINES", 1)
    cluster = _FlakyLogs()
    followers = LogFollowers(cluster)
    try:
        followers.follow(job, "gpu-vision", "train-0")
        deadline = time.monotonic() + 20
        while followers.active or len(_lines(job)) < 4:
            assert time.monotonic() < deadline, f"stored only {_lines(job)}"
            time.sleep(0.1)
    finally:
        followers.shutdown()
    assert cluster.calls == 2
    assert _lines(job) == ["one", "two", "three", "four"]


def _lines(job: Job) -> list[str]:
    return "\n".join(text for _, _, text in _stored(job)).splitlines()
