"""A live portal for gpuctl: uvicorn serving `portal.asgi.application` on a real port, and a
TCP relay the tests can cut."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from channels.db import database_sync_to_async

from portal.asgi import application


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveServer:
    """uvicorn serving the portal on its own event loop, in a thread."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            application, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None

    def _serve(self) -> None:
        # The runner cancels what is left on the loop at the end (the channel layer's reader).
        with asyncio.Runner() as runner:
            self.loop = runner.get_loop()
            runner.run(self.server.serve())

    def __enter__(self) -> LiveServer:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError(f"uvicorn did not start on port {self.port}")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def call(self, work: Callable[[], Any]) -> Any:
        """Run sync code (ORM writes, live sends) as the server's own views would: on its loop,
        so the in-memory channel layer is used from the loop it belongs to. Its database
        connection goes back afterwards, as a view's does (PostgreSQL's pool is small)."""
        assert self.loop is not None
        future = asyncio.run_coroutine_threadsafe(database_sync_to_async(work)(), self.loop)
        return future.result(timeout=30)


class Relay:
    """Forwards TCP connections to the server; `cut()` drops every open one and holds new ones
    until `resume()`, so a client's reconnection lands after what the test did meanwhile."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.open = threading.Event()
        self.open.set()
        self.sockets: list[socket.socket] = []
        self.requests: list[bytes] = []  # the first line each client sent
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _address = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        self.open.wait()
        upstream = socket.create_connection(("127.0.0.1", self.target))
        with self.lock:
            self.sockets += [client, upstream]
        threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
        self._pump(upstream, client, False)

    def _pump(self, source: socket.socket, sink: socket.socket, first: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if first:
                    with self.lock:
                        self.requests.append(data.split(b"\r\n", 1)[0])
                    first = False
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.open.clear()
        with self.lock:
            cut, self.sockets = self.sockets, []
        for sock in cut:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def resume(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.listener.close()
        self.cut()

    def websocket_opens(self) -> int:
        with self.lock:
            return sum(1 for line in self.requests if line.startswith(b"GET /ws/"))
