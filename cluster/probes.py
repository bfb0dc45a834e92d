"""The controller's probes: `/healthz` (its loop still turns) and `/readyz` (it can work: the
database answers and, while it leads, so does the Kubernetes API), on a port of its own.

The controller serves no other HTTP, so the probes get a small server from the standard
library in a thread (`http.server`): two paths, plain "ok" or "not ready", nothing else said;
why a probe failed goes to the log. A standby is ready while the database answers: it can take
the lease over. A leader that cannot reach Kubernetes is not ready, and a loop that has not
turned for `stale_after_s` (stuck in a call, deadlocked) is not alive, so the kubelet restarts
the pod and the standby takes over.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from django.contrib.contenttypes.models import ContentType
from django.db import DatabaseError, connection

if TYPE_CHECKING:
    from cluster.controller import Controller

log = logging.getLogger(__name__)
STALE_AFTER_S = 120.0
"""A turn that takes longer than this is a stuck loop (the longest duty takes seconds)."""


class Probes:
    def __init__(self, controller: Controller, stale_after_s: float = STALE_AFTER_S) -> None:
        self.controller, self.stale_after_s = controller, stale_after_s

    def alive(self) -> bool:
        turned = self.controller.turned_at
        if turned is None:
            return True  # starting: the liveness probe's initial delay covers it
        stale = self.controller.clock() - turned > self.stale_after_s
        if stale:
            log.warning(
                "liveness: the controller's loop has not turned for %.0f s", self.stale_after_s
            )
        return not stale

    def ready(self) -> bool:
        if not _database():
            return False
        if self.controller.leading and not self.controller.backend.reachable():
            log.warning("readiness: leading, and the Kubernetes API does not answer")
            return False
        return True


def _database() -> bool:
    """One query on this thread's own connection, given back at once (probes come from a
    thread of the probe server, not the controller's)."""
    try:
        ContentType.objects.exists()  # any query: a stale connection fails it
        return True
    except DatabaseError as exc:
        log.warning("readiness: database: %s", exc)
        return False
    finally:
        connection.close()


def serve(probes: Probes, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:
    """Answer the probes on `port` (0: any free one, see `server_address`) in a daemon thread
    until `shutdown()`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            checks = {"/healthz": probes.alive, "/readyz": probes.ready}
            check = checks.get(self.path.split("?", 1)[0])
            if check is None:
                self._answer(404, "not found")
            elif check():
                self._answer(200, "ok")
            else:
                self._answer(503, "not ready" if self.path.startswith("/readyz") else "stuck")

        def _answer(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a probe every few seconds is no news: failures are logged by the checks

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="probes", daemon=True).start()
    return server
