"""Follow running pods' logs and persist them in chunks, so logs outlive their pods.

A bounded pool of follower threads reads each pod's log from the start; on a restart the lines
already stored are skipped, so nothing is lost or stored twice. Lines are flushed as a chunk
every FLUSH_S or FLUSH_LINES, whichever comes first.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

from django.db import close_old_connections, transaction
from django.db.models import Max, Sum

from cluster.backend import ClusterBackend, Unavailable
from cluster.models import JobLogChunk
from jobs.models import Job
from jobs.streams import publish_log_chunk

log = logging.getLogger(__name__)
FLUSH_S = 0.5
FLUSH_LINES = 200


def store_chunk(job: Job, pod: str, lines: list[str]) -> JobLogChunk:
    """Append lines to a pod's log; numbering continues from what is stored."""
    with transaction.atomic():
        stored = (
            JobLogChunk.objects.for_team(job.team)
            .filter(job=job, pod=pod)
            .aggregate(seq=Max("seq"), lines=Sum("line_count"))
        )
        chunk = JobLogChunk.objects.create(
            team=job.team,
            job=job,
            pod=pod,
            seq=(stored["seq"] or 0) + 1,
            first_line=(stored["lines"] or 0) + 1,
            line_count=len(lines),
            text="\n".join(lines),
        )
        publish_log_chunk(chunk)
    return chunk


def stored_lines(job: Job, pod: str) -> int:
    total = (
        JobLogChunk.objects.for_team(job.team)
        .filter(job=job, pod=pod)
        .aggregate(n=Sum("line_count"))["n"]
    )
    return int(total or 0)


def _batches(lines: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    flushed = 0.0  # the first line goes out at once
    for line in lines:
        batch.append(line)
        if len(batch) >= FLUSH_LINES or time.monotonic() - flushed >= FLUSH_S:
            yield batch
            batch, flushed = [], time.monotonic()
    if batch:
        yield batch


class LogFollowers:
    """One follower per pod at most, on a bounded pool; safe to ask for a pod many times."""

    def __init__(self, backend: ClusterBackend, workers: int = 16) -> None:
        self.backend = backend
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="log")
        self.active: set[tuple[int, str]] = set()
        self.lock = threading.Lock()

    def follow(self, job: Job, namespace: str, pod: str) -> None:
        key = (job.pk, pod)
        with self.lock:
            if key in self.active:
                return
            self.active.add(key)
        self.pool.submit(self._run, job, namespace, pod, key)

    def _run(self, job: Job, namespace: str, pod: str, key: tuple[int, str]) -> None:
        try:
            lines = self.backend.pod_log(namespace, pod, follow=True)
            for batch in _batches(islice(lines, stored_lines(job, pod), None)):
                store_chunk(job, pod, batch)
        except Unavailable as exc:
            log.info("log of %s/%s not available: %s", namespace, pod, exc)
        except Exception:
            log.exception("following the log of %s/%s", namespace, pod)
        finally:
            close_old_connections()
            with self.lock:
                self.active.discard(key)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
