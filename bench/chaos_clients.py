"""The chaos bench's workload (`bench/chaos.py`): 300 submissions, and the API clients that
send them, retrying each with its `Idempotency-Key` until it is answered."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

JOBS = 300
CLIENTS = 8
SUBMIT_SPAN_S = 200.0
"""The submissions are spread evenly over this many seconds."""
RETRY_FOR_S = 150.0
REQUEST_TIMEOUT_S = 30.0
TEAMS = ("vision", "nlp", "speech")
GPU_TYPES = {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB"}
SIZES = (1, 1, 1, 1, 2, 2, 2, 4, 4, 8)
JOB_MEMORY = "64Gi"  # eight fit on a node of the bench's cluster (1Ti)
RUNTIME_S = (300, 1200)
"""kubesim seconds (3-12 s of wall time at the bench's speed)."""


@dataclass
class Answer:
    sent_at: float  # wall clock, to compare with the database's times
    sent: float  # monotonic, as the bench's outages
    answered: float
    web: int
    status: int | None  # None: no HTTP answer (connection error, timeout)
    error: str = ""


@dataclass
class Submission:
    offset: float
    client: int
    body: dict[str, Any]
    key: str
    answers: list[Answer] = field(default_factory=list)
    job_id: int | None = None

    @property
    def name(self) -> str:
        return str(self.body["name"])

    @property
    def acknowledged(self) -> bool:
        return self.job_id is not None


def plan() -> list[Submission]:
    """The 300 submissions: sizes, GPU types, runtimes and exit codes mixed, reproducibly."""
    rng = random.Random(18)
    submissions = []
    for i in range(JOBS):
        client = i % CLIENTS
        env = {
            "KUBESIM_RUNTIME_SECONDS": str(rng.randint(*RUNTIME_S)),
            "KUBESIM_EXIT_CODE": "1" if rng.random() < 0.1 else "0",
        }
        body = {
            "name": f"c{client}-{i:03d}",
            "team": TEAMS[client % len(TEAMS)],
            "queue": "normal",
            "image": "bench:1",
            "command": ["run"],
            "gpu_type": rng.choice(sorted(GPU_TYPES)),
            "gpus_per_node": rng.choice(SIZES),
            "cpu": "1",
            "memory": JOB_MEMORY,
            "env": env,
        }
        submissions.append(Submission(i * SUBMIT_SPAN_S / JOBS, client, body, uuid.uuid4().hex))
    return submissions


class Client(threading.Thread):
    """One API client: its submissions in time order, each retried until answered."""

    def __init__(
        self,
        token: str,
        ports: list[int],
        submissions: list[Submission],
        start: float,
        stop: threading.Event,
        in_flight: Counter[int],
    ) -> None:
        super().__init__(daemon=True)
        self.token, self.ports, self.submissions = token, ports, submissions
        self.start_at, self.stop = start, stop
        self.in_flight = in_flight

    def run(self) -> None:
        for submission in self.submissions:
            if self.stop.wait(max(0.0, self.start_at + submission.offset - time.monotonic())):
                return
            self.submit(submission)

    def submit(self, submission: Submission) -> None:
        web, tries = submission.client % len(self.ports), 0
        give_up = time.monotonic() + RETRY_FOR_S
        while not self.stop.is_set():
            answer, payload = self.post(web, submission)
            submission.answers.append(answer)
            if answer.status == 201:
                submission.job_id = int(payload["id"])
                break
            retry = answer.status is None or answer.status >= 500 or answer.status == 429
            if not retry or time.monotonic() >= give_up:
                break  # a 4xx (a 409 included) is final
            tries += 1
            web = (web + 1) % len(self.ports)  # the load balancer sends it elsewhere
            self.stop.wait(min(4.0, 0.5 * 2**tries))

    def post(self, web: int, submission: Submission) -> tuple[Answer, dict[str, Any]]:
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "Idempotency-Key": submission.key,
        }
        sent_at, sent = time.time(), time.monotonic()
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.ports[web], timeout=REQUEST_TIMEOUT_S
        )
        self.in_flight[web] += 1
        try:
            connection.request("POST", "/api/v1/jobs/", json.dumps(submission.body), headers)
            response = connection.getresponse()
            raw, status = response.read(), response.status
            answer = Answer(sent_at, sent, time.monotonic(), web, status)
        except (OSError, http.client.HTTPException) as exc:
            return Answer(sent_at, sent, time.monotonic(), web, None, type(exc).__name__), {}
        finally:
            self.in_flight[web] -= 1
            connection.close()
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = {}
        if status >= 400:
            answer.error = raw[:200].decode(errors="replace")
        return answer, payload if isinstance(payload, dict) else {}
