"""A webhook receiver on 127.0.0.1: records what it is sent, answers with a scripted status."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.failures_left: dict[str, int] = {}
        """Path → how many more posts to answer with 503 before accepting."""
        self.answers: dict[str, dict[str, Any]] = {}
        """Path → the JSON body to answer with (200)."""
        self.url = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                receiver.received.append((self.path, body))
                path = self.path.split("?")[0]
                if receiver.failures_left.get(path, 0) > 0:
                    receiver.failures_left[path] -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                answer = json.dumps(receiver.answers.get(path, {"ok": True})).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def paths(self) -> list[str]:
        return [path.split("?")[0] for path, _ in self.received]


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), receiver.handler())
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
