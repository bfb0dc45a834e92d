"""Following a job's log over its websocket (`/ws/jobs/<id>/?after=<chunk id>`).

The portal sends each pod's log in numbered chunks (`seq` from 0, `chunk_id` global and growing),
replays every persisted chunk past `after` at connect, then streams new ones, and sends the job's
status once the replay is done. A dropped connection is resumed with `after` = the last chunk
printed: nothing is lost, and what comes twice (a chunk already printed) is skipped by its seq.
Should a chunk ever arrive ahead of its pod's turn (a message lost between the portal's
processes), the follower reconnects from that pod's last printed chunk instead of printing out of
order.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from cli.errors import ERROR, NOT_FOUND, CliError
from cli.i18n import _

TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
SETTLE_S = 2.0
"""After the job ended, its last lines may still be on their way: wait this long for more."""
RETRY_DELAYS_S = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0, 15.0, 15.0)
"""Pauses before each reconnection in a row that brings nothing; then give up (about a minute)."""
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def websocket_url(url: str, job: int, after: int) -> str:
    parts = urlsplit(url.rstrip("/"))
    scheme = "wss" if parts.scheme == "https" else "ws"
    return f"{scheme}://{parts.netloc}{parts.path}/ws/jobs/{job}/?after={after}"


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def job_socket(url: str, token: str, job: int, after: int = 0) -> ClientConnection:
    """The job's websocket, signed in with the API token."""
    return connect(
        websocket_url(url, job, after),
        origin=Origin(origin_of(url)),
        additional_headers={"Authorization": f"Bearer {token}"},
        max_size=MAX_MESSAGE_BYTES,
        proxy=None,
    )


@dataclass
class Cursor:
    """What has been printed: the resume point and each pod's last chunk."""

    after: int = 0
    seqs: dict[str, int] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)

    def place(self, chunk: dict[str, Any]) -> bool | None:
        """True: the pod's next chunk; False: printed already; None: one before it is missing."""
        pod, seq = chunk["pod"], chunk["seq"]
        last = self.seqs.get(pod, -1)
        if seq <= last:
            return False
        if seq > last + 1:
            self.after = min(self.after, self.ids.get(pod, 0))
            return None
        self.seqs[pod], self.ids[pod] = seq, chunk["chunk_id"]
        self.after = max(self.after, chunk["chunk_id"])
        return True


class LogFollower:
    """Prints a job's log until the job has ended, across dropped connections."""

    def __init__(
        self,
        url: str,
        token: str,
        job: int,
        *,
        write: Callable[[str], None],
        tail: int | None = None,
        prefix_pods: bool = False,
    ) -> None:
        self.url, self.token, self.job = url, token, job
        self.write, self.prefix_pods = write, prefix_pods
        self.cursor = Cursor()
        # With --tail, the replay is held back until the first status message ends it.
        self.backlog: dict[str, deque[str]] | None = {} if tail is not None else None
        self.tail = tail
        self.ended: str | None = None

    def run(self) -> str:
        """Follow to the end; returns the job's final state."""
        failures = 0
        while True:
            try:
                with self._connect() as ws:
                    if self._read(ws):
                        failures = 0
                if self.ended:
                    return self.ended
            except InvalidStatus as exc:
                raise self._refused(exc.response.status_code) from exc
            except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed) as exc:
                if self.ended:
                    return self.ended
                if failures >= len(RETRY_DELAYS_S):
                    raise CliError(
                        _("Lost the log stream of job %(job)s: %(error)s")
                        % {"job": self.job, "error": str(exc) or type(exc).__name__},
                        ERROR,
                    ) from exc
                time.sleep(RETRY_DELAYS_S[failures])
                failures += 1

    def _connect(self) -> ClientConnection:
        return job_socket(self.url, self.token, self.job, self.cursor.after)

    def _refused(self, status: int) -> CliError:
        return CliError(
            _(
                "The portal refused the log stream of job %(job)s (HTTP %(status)s): the token "
                "may have expired, or this portal does not take API tokens on websockets."
            )
            % {"job": self.job, "status": status},
            NOT_FOUND,
        )

    def _read(self, ws: ClientConnection) -> bool:
        """Handle messages until the job has ended and settled, or a reconnection is due.
        True if anything arrived (the connection was worth making)."""
        arrived = False
        while True:
            try:
                raw = ws.recv(timeout=SETTLE_S if self.ended else None)
            except TimeoutError:
                return arrived
            arrived = True
            message = json.loads(raw)
            if message.get("type") == "job.log":
                placed = self.cursor.place(message)
                if placed is None:
                    return arrived  # reconnect from the pod's last printed chunk
                if placed:
                    self._lines(message)
            elif message.get("type") == "job.status":
                self._flush_backlog()
                if message.get("state") in TERMINAL_STATES:
                    self.ended = message["state"]

    def _lines(self, chunk: dict[str, Any]) -> None:
        pod = chunk["pod"]
        lines = [f"[{pod}] {line}" if self.prefix_pods else line for line in chunk["lines"]]
        if self.backlog is None:
            for line in lines:
                self.write(line)
        else:
            self.backlog.setdefault(pod, deque(maxlen=self.tail)).extend(lines)

    def _flush_backlog(self) -> None:
        if self.backlog is None:
            return
        held, self.backlog = self.backlog, None
        for lines in held.values():
            for line in lines:
                self.write(line)
