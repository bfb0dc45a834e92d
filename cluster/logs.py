"""Follow running pods' logs and persist them in chunks, so logs outlive their pods.

Followers, tasks on one event loop thread, read each pod's log from the start and hand its
lines, numbered from the log's first line, to one writer thread. The writer stores whatever has
arrived from every pod in one transaction (one INSERT for all the chunks) and then streams the
chunks. Lines already stored are skipped, so a follower started again (a controller restart, a
pod reported twice, the API back after an outage) loses nothing and stores nothing twice. A
follower hands its lines over every FLUSH_S or FLUSH_LINES, whichever comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from django.db import DatabaseError, close_old_connections, connection, transaction
from django.db.models import Max, Sum

from base.streams import own_event_loop, publish_log_chunks
from cluster.backend import ClusterBackend, Unavailable
from cluster.models import JobLogChunk
from jobs.models import Job

log = logging.getLogger(__name__)
FLUSH_S = 0.5
FLUSH_LINES = 200
RETRY_START_S, RETRY_MAX_S = 1.0, 30.0
"""How long a follower waits before reading a log again after the API went away."""
WRITE_BATCH = 500
"""Pieces stored in one transaction at most."""

Key = tuple[int, str]  # (job id, pod name)


@dataclass(frozen=True)
class Piece:
    """Lines of one pod's log, the first being line `first_line` (1-based) of the whole log."""

    team_id: int
    job_id: int
    pod: str
    first_line: int
    lines: tuple[str, ...]

    @property
    def key(self) -> Key:
        return (self.job_id, self.pod)


@dataclass(frozen=True)
class Finished:
    """A follower is done with a pod: the writer may forget what it knew of it."""

    key: Key


async def _batches(lines: AsyncIterator[str]) -> AsyncIterator[list[str]]:
    batch: list[str] = []
    flushed = 0.0  # the first line goes out at once
    async for line in lines:
        batch.append(line)
        if len(batch) >= FLUSH_LINES or time.monotonic() - flushed >= FLUSH_S:
            yield batch
            batch, flushed = [], time.monotonic()
    if batch:
        yield batch


class LogWriter:
    """Stores pieces from every follower; keeps (chunks, lines) stored per pod it is following."""

    def __init__(self) -> None:
        self.stored: dict[Key, tuple[int, int]] = {}

    def write(self, items: list[Piece | Finished]) -> list[JobLogChunk]:
        pieces = [item for item in items if isinstance(item, Piece)]
        with transaction.atomic():
            self._load({piece.key for piece in pieces} - self.stored.keys())
            chunks = []
            for piece in pieces:
                seq, lines = self.stored[piece.key]
                skip = lines - (piece.first_line - 1)  # lines of this piece already stored
                fresh = piece.lines[max(0, skip) :]
                if not fresh:
                    continue
                chunks.append(
                    JobLogChunk(
                        team_id=piece.team_id,
                        job_id=piece.job_id,
                        pod=piece.pod,
                        seq=seq + 1,
                        first_line=lines + 1,
                        line_count=len(fresh),
                        # PostgreSQL's text cannot hold NUL: one such byte would fail the
                        # write, and the writer would retry it forever.
                        text="\n".join(fresh).replace("\x00", "\ufffd"),
                    )
                )
                self.stored[piece.key] = (seq + 1, lines + len(fresh))
            try:
                JobLogChunk.unscoped.bulk_create(chunks)
            except DatabaseError:
                self.stored.clear()  # what was counted in memory did not get stored
                raise
            publish_log_chunks(chunks)
        for item in items:
            if isinstance(item, Finished):
                self.stored.pop(item.key, None)
        return chunks

    def _load(self, keys: set[Key]) -> None:
        if not keys:
            return
        stored = (
            JobLogChunk.unscoped.filter(job_id__in={job_id for job_id, _ in keys})
            .values("job_id", "pod")
            .annotate(seq=Max("seq"), lines=Sum("line_count"))
        )
        found = {(row["job_id"], row["pod"]): (row["seq"], row["lines"]) for row in stored}
        for key in keys:
            self.stored[key] = found.get(key, (0, 0))


class LogFollowers:
    """One follower per pod at most, safe to ask for a pod many times.

    Every follower is a task on one event loop thread: a stream is held for as long as its pod
    runs, and with a thread for each, a bounded pool meant that only so many pods were followed
    at once while the others waited for one to end.
    """

    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend
        self.active: set[Key] = set()
        self.lock = threading.Lock()
        self.writer = LogWriter()
        self.outbox: queue.Queue[Piece | Finished] = queue.Queue()
        self._stop = threading.Event()
        self.loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._serve, name="log-followers", daemon=True)
        self._loop_thread.start()
        self._writer_thread = threading.Thread(target=self._write_loop, name="log-writer")
        self._writer_thread.daemon = True
        self._writer_thread.start()

    def follow(self, job: Job, namespace: str, pod: str) -> None:
        key = (job.pk, pod)
        with self.lock:
            if key in self.active:
                return
            self.active.add(key)
        asyncio.run_coroutine_threadsafe(self._run(job.team_id, job.pk, namespace, pod), self.loop)

    async def _run(self, team_id: int, job_id: int, namespace: str, pod: str) -> None:
        try:
            backoff = RETRY_START_S
            while not await self._follow_once(team_id, job_id, namespace, pod):
                await asyncio.sleep(backoff)  # the API is away: read it all again when back
                backoff = min(backoff * 2, RETRY_MAX_S)
        except Exception:
            log.exception("following the log of %s/%s", namespace, pod)
        finally:
            self.outbox.put(Finished((job_id, pod)))
            with self.lock:
                self.active.discard((job_id, pod))

    async def _follow_once(self, team_id: int, job_id: int, namespace: str, pod: str) -> bool:
        """Follow from the log's first line (the writer skips what it has stored) until the
        pod ends (True) or the API goes away (False)."""
        first_line = 1
        try:
            async for lines in _batches(self.backend.follow_log(namespace, pod)):
                self.outbox.put(Piece(team_id, job_id, pod, first_line, tuple(lines)))
                first_line += len(lines)
        except Unavailable as exc:
            log.info("log of %s/%s not available: %s", namespace, pod, exc)
            return False
        return True

    def _serve(self) -> None:
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    async def _cancel_all(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.backend.close_log_streams()

    def _write_loop(self) -> None:
        try:
            with own_event_loop():
                self._write_until_stopped()
        finally:
            connection.close()  # this thread's own: back to the pool, not leaked with the thread

    def _write_until_stopped(self) -> None:
        retry: list[Piece | Finished] = []
        while not self._stop.is_set():
            items = retry or self._take()
            if not items:
                continue
            try:
                self.writer.write(items)
                retry = []
            except DatabaseError as exc:  # kept in memory and written when the database is back
                log.warning("storing log lines: %s; retrying", exc)
                retry = items
                close_old_connections()
                self._stop.wait(1.0)
            except Exception:
                log.exception("storing log lines")
                retry = []

    def _take(self) -> list[Piece | Finished]:
        try:
            items = [self.outbox.get(timeout=0.2)]
        except queue.Empty:
            return []
        while len(items) < WRITE_BATCH:
            try:
                items.append(self.outbox.get_nowait())
            except queue.Empty:
                break
        return items

    def shutdown(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):  # a loop already gone has nothing to cancel
            asyncio.run_coroutine_threadsafe(self._cancel_all(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
