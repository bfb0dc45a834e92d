"""`gpuctl logs`: the whole log over HTTP, and `-f` over the job's real websocket, across a
dropped connection, printing every line exactly once."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from base.streams import publish_log_chunks
from cli.errors import ERROR, NOT_FOUND, CliError
from cli.follow import Cursor, LogFollower
from cluster.models import JobLogChunk
from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from tests.cli.conftest import Live
from tests.cli.server import Relay, free_port
from tests.conftest import spec
from tests.monitoring.conftest import run_on

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60  # a guard against hanging, never a measure of anything


@pytest.fixture
def job(live: Live) -> Job:
    submitted = submit_job(live.world.vision, parse_spec(spec()), acting_user=live.world.bob)
    return run_on(submitted, {"h100-a-1": 1})


def log(live: Live, job: Job, *lines: str, pod: str = "train-0") -> None:
    """Store the pod's next chunk and stream it, as the controller's log writer does."""

    def write() -> None:
        stored = JobLogChunk.objects.for_team(job.team).filter(job=job, pod=pod)
        seq = stored.count()
        first = sum(stored.values_list("line_count", flat=True)) + 1
        chunk = JobLogChunk.objects.create(
            team=job.team,
            job=job,
            pod=pod,
            seq=seq,
            text="".join(f"{line}\n" for line in lines),
            first_line=first,
            line_count=len(lines),
        )
        publish_log_chunks([chunk])

    live.server.call(write)


class Follow:
    """`python -m cli logs JOB -f` in a process of its own, its stdout read line by line."""

    def __init__(self, live: Live, url: str, job: Job, *extra: str) -> None:
        env = {
            **os.environ,
            "GPUCTL_URL": url,
            "GPUCTL_TOKEN": live.token(live.world.bob),
            "XDG_CONFIG_HOME": str(live.home),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli", "logs", str(job.pk), "-f", *extra],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def next(self, count: int) -> list[str]:
        return [self.lines.get(timeout=WAIT_S) for _ in range(count)]

    def finish(self) -> tuple[int, list[str], str]:
        code = self.process.wait(timeout=WAIT_S)
        assert self.process.stderr is not None
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        return code, rest, self.process.stderr.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def relay(live: Live) -> Iterator[Relay]:
    relay = Relay(live.server.port)
    yield relay
    relay.close()


pytestmark = pytest.mark.django_db(transaction=True)


def test_logs_prints_the_whole_log_or_its_tail(live: Live, job: Job) -> None:
    log(live, job, "epoch 1", "epoch 2")
    log(live, job, "epoch 3")
    whole = live.run("logs", str(job.pk), user=live.world.bob)
    assert whole.exit_code == 0 and whole.output == "epoch 1\nepoch 2\nepoch 3\n"
    tail = live.run("logs", str(job.pk), "--tail", "2", user=live.world.bob)
    assert tail.output == "epoch 2\nepoch 3\n"


def test_follow_resumes_after_a_dropped_connection_without_losing_or_repeating_lines(
    live: Live, job: Job, relay: Relay
) -> None:
    log(live, job, "line 1", "line 2")
    log(live, job, "line 3")
    follow = Follow(live, relay.url, job)
    try:
        assert follow.next(3) == ["line 1", "line 2", "line 3"]  # the replay
        log(live, job, "line 4", "line 5")
        assert follow.next(2) == ["line 4", "line 5"]  # live
        relay.cut()  # the connection drops; reconnections wait until resume()
        log(live, job, "line 6")
        log(live, job, "line 7")
        relay.resume()
        assert follow.next(2) == ["line 6", "line 7"]  # what it missed, once
        log(live, job, "line 8")
        assert follow.next(1) == ["line 8"]
        assert relay.websocket_opens() == 2
        cancelled = live.run("cancel", str(job.pk), user=live.world.bob)
        assert cancelled.exit_code == 0, cancelled.output
        code, rest, errors = follow.finish()
    finally:
        follow.stop()
    assert (code, rest) == (0, []), errors


def test_follow_with_tail_starts_with_the_last_lines(live: Live, job: Job) -> None:
    log(live, job, "a", "b", "c")
    log(live, job, "d", "e")
    follow = Follow(live, live.url, job, "--tail", "2")
    try:
        assert follow.next(2) == ["d", "e"]
        log(live, job, "f")
        assert follow.next(1) == ["f"]
        assert live.run("cancel", str(job.pk), user=live.world.bob).exit_code == 0
        code, rest, errors = follow.finish()
    finally:
        follow.stop()
    assert (code, rest) == (0, []), errors


def test_follow_of_a_foreign_job_exits_3_without_a_line(live: Live, job: Job) -> None:
    log(live, job, "secret")
    carol = live.run("logs", str(job.pk), "-f", user=live.world.carol)
    assert carol.exit_code == NOT_FOUND and "secret" not in carol.output


def test_follow_gives_up_with_exit_1_when_the_portal_stays_away(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("cli.follow.RETRY_DELAYS_S", (0.0, 0.0))
    follower = LogFollower(f"http://127.0.0.1:{free_port()}", "t", 7, write=print)
    with pytest.raises(CliError) as refused:
        follower.run()
    assert refused.value.exit_code == ERROR and "Lost the log stream of job 7" in str(refused.value)


def _chunk(pod: str, seq: int, chunk_id: int) -> dict[str, object]:
    return {"pod": pod, "seq": seq, "chunk_id": chunk_id, "lines": []}


def test_the_cursor_skips_chunks_printed_and_resumes_before_a_gap() -> None:
    cursor = Cursor()
    assert cursor.place(_chunk("a", 0, 5)) is True
    assert cursor.place(_chunk("b", 0, 6)) is True
    assert cursor.place(_chunk("a", 1, 9)) is True
    assert cursor.after == 9
    assert cursor.place(_chunk("a", 1, 9)) is False  # replayed again: skipped
    assert cursor.place(_chunk("b", 2, 12)) is None  # b's seq 1 went missing
    assert cursor.after == 6  # reconnect from b's last printed chunk
    assert cursor.place(_chunk("a", 1, 9)) is False
    assert cursor.place(_chunk("b", 1, 11)) is True
    assert cursor.place(_chunk("b", 2, 12)) is True
    assert cursor.after == 12
