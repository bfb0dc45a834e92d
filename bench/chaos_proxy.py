"""A TCP proxy on 127.0.0.1 that `bench/chaos.py` puts between the portal and a dependency.

    python bench/chaos_proxy.py --target PORT

It listens on a free port of 127.0.0.1 (printed on its first line: `listening PORT`) and passes
bytes both ways to 127.0.0.1:TARGET. SIGUSR1 takes the dependency away: every open connection
is cut and the port stops listening, so new connections are refused as by a stopped server.
SIGUSR2 brings it back on the same port. SIGTERM ends it. Standard library only, so the shared
PostgreSQL and Redis of the machine are never stopped: only this bench's path to them is.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

HOST = "127.0.0.1"
CHUNK = 64 * 1024


class Proxy:
    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def up(self) -> None:
        """Listen (again, on the same port once it has one)."""
        if self.server is None:
            self.server = await asyncio.start_server(self._serve, HOST, self.port)
            self.port = self.server.sockets[0].getsockname()[1]

    def down(self) -> None:
        """Refuse new connections and cut every open one."""
        if self.server is not None:
            self.server.close()
            self.server = None
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(HOST, self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, upstream_writer)
        self.writers.update(pair)
        try:
            await asyncio.gather(
                self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer)
            )
        finally:
            for end in pair:
                self.writers.discard(end)
                end.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()  # the other direction ends with it


async def main(target: int) -> None:
    proxy, loop, done = Proxy(target), asyncio.get_running_loop(), asyncio.Event()
    await proxy.up()
    print(f"listening {proxy.port}", flush=True)
    loop.add_signal_handler(signal.SIGUSR1, proxy.down)
    loop.add_signal_handler(signal.SIGUSR2, lambda: loop.create_task(proxy.up()))
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_signal_handler(signal.SIGINT, done.set)
    await done.wait()
    proxy.down()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=int, required=True, help="port on 127.0.0.1")
    asyncio.run(main(parser.parse_args().target))
