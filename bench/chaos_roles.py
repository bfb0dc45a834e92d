"""The chaos bench's processes (`bench/chaos.py`): started, killed, and started again when one
exits that the bench did not kill, as a Deployment would."""

from __future__ import annotations

import ctypes
import re
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.postgres import ROOT

RESTART_S = 2.0
"""How long a role process that exited stays away before it is started again."""


def _die_with_parent() -> None:
    """Children get SIGKILL if the bench dies, so none outlives it."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[Any]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )


def end(process: subprocess.Popen[Any] | None, sig: int = signal.SIGTERM) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@dataclass
class Role:
    """A portal role's process, started again when it exits unless the bench keeps it away."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    port: int = 0  # a web process's
    process: subprocess.Popen[Any] | None = None
    held: bool = False
    killed: bool = False
    down_since: float | None = None
    exits: list[str] = field(default_factory=list)
    """Exits the bench did not cause: the last line its process logged."""

    def start(self) -> None:
        self.process = spawn(self.argv, self.log, self.env)
        self.killed, self.down_since = False, None

    def kill(self) -> None:
        self.killed = True
        end(self.process, signal.SIGKILL)

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    def supervise(self, now: float) -> None:
        if self.process is None or self.process.poll() is None or self.held:
            return
        if self.down_since is None:
            self.down_since = now
            if not self.killed:
                self.exits.append(_last_line(self.log))
        elif now - self.down_since >= RESTART_S:
            self.start()


EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Refused))(?::|$)")
"""A traceback's last line: the exception's class (and its message)."""


def _last_line(log: Path) -> str:
    """What a process that ended logged last: its exception if it left a traceback."""
    lines = log.read_text(errors="replace").strip().splitlines()
    raised = [line for line in lines[-40:] if EXCEPTION.match(line)]
    return (raised or lines or ["(nothing logged)"])[-1][:200]


def answers(port: int, request: bytes, expect: bytes) -> bool:
    """Whether something listening on this port answers `request` as expected."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(request)
            return sock.recv(64).startswith(expect)
    except OSError:
        return False
