"""`gpuctl top` live: a table first from the API, then one per message of the job's websocket,
for as many tables as `--count` asks; nothing waits on a clock, each table follows an event."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from cluster.models import Node
from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from monitoring.endpoint import PATH
from monitoring.tokens import rotate_node_token
from tests.cli.conftest import Live
from tests.conftest import spec
from tests.monitoring.conftest import NODE, batch, gpu_sample, run_on

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60  # a guard against hanging, never a measure of anything


class Top:
    """`python -m cli top JOB ARGS` in a process of its own, its stdout read line by line."""

    def __init__(self, live: Live, job: Job, *args: str) -> None:
        env = {
            **os.environ,
            "GPUCTL_URL": live.url,
            "GPUCTL_TOKEN": live.token(live.world.alice),
            "XDG_CONFIG_HOME": str(live.home),
            "LANGUAGE": "en",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli", "top", str(job.pk), *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # the end of its output

    def table(self) -> list[str]:
        """The next table it printed: its header line, then the columns and rows up to the
        blank line that ends it."""
        header = self.lines.get(timeout=WAIT_S)
        assert header is not None and self.lines.get(timeout=WAIT_S) == "", header
        lines = [header, ""]
        while line := self.lines.get(timeout=WAIT_S):
            lines.append(line)
        return lines

    def finish(self) -> tuple[int, list[str], str]:
        code = self.process.wait(timeout=WAIT_S)
        rest: list[str] = []
        while (line := self.lines.get(timeout=WAIT_S)) is not None:
            rest.append(line)
        assert self.process.stderr is not None
        return code, rest, self.process.stderr.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _post(live: Live, token: str, util: float) -> None:
    samples = [gpu_sample(i, time.time(), DCGM_FI_DEV_GPU_UTIL=util + i) for i in range(2)]
    posted = httpx.post(
        live.url + PATH, json=batch(samples), headers={"Authorization": f"Bearer {token}"}
    )
    assert posted.is_success, posted.text


def _rows(table: list[str]) -> list[list[str]]:
    """(node, gpu, util) of each GPU row: the lines under the column names."""
    return [line.split()[:3] for line in table[3:]]


def test_top_redraws_on_each_live_message_and_stops_after_count_tables(live: Live) -> None:
    world = live.world
    node = Node.objects.create(name=NODE, gpu_type=world.h100, gpu_capacity=8, ready=True)
    agent = rotate_node_token(node)
    job = submit_job(world.vision, parse_spec(spec(gpus_per_node=2)), acting_user=world.bob)
    run_on(job, {NODE: 2})
    _post(live, agent, 10)

    top = Top(live, job, "--count", "3")
    try:
        first = top.table()  # from the API, before the websocket opens
        assert first[0] == f"job {job.pk}: RUNNING"
        assert _rows(first) == [[NODE, "0", "10%"], [NODE, "1", "11%"]]
        # The socket's first message is the job's status as it opened: the second table, and
        # the sign that the socket has joined the job's stream.
        assert _rows(top.table()) == [[NODE, "0", "10%"], [NODE, "1", "11%"]]
        _post(live, agent, 70)
        third = top.table()
        assert third[0] == f"job {job.pk}: RUNNING"
        assert _rows(third) == [[NODE, "0", "70%"], [NODE, "1", "71%"]]
        code, rest, errors = top.finish()  # the third table was the last
    finally:
        top.stop()
    assert (code, rest) == (0, []), errors


def test_top_refuses_a_count_below_one(live: Live) -> None:
    result = live.run("top", "1", "--count", "0", user=live.world.alice)
    assert result.exit_code == 2 and "--count" in result.output
