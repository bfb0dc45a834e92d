"""Reading a job's persisted log: whole or its tail, all pods or one, each pod in order."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import QuerySet

from cluster.models import JobLogChunk
from jobs.models import Job


def chunks_of(job: Job, pod: str | None = None) -> QuerySet[JobLogChunk]:
    found = JobLogChunk.objects.for_team(job.team).filter(job=job)
    return found.filter(pod=pod) if pod else found


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _tail(job: Job, pod: str, lines: int) -> Iterator[str]:
    """The last `lines` lines of a pod, reading only the newest chunks that hold them."""
    picked: list[str] = []
    held = 0
    for text, count in chunks_of(job, pod).order_by("-seq").values_list("text", "line_count"):
        if held >= lines:
            break
        picked.append(text)
        held += count
    kept = "".join(_with_newline(t) for t in reversed(picked)).splitlines()[-lines:]
    yield "".join(line + "\n" for line in kept)


def log_text(job: Job, pod: str | None = None, tail: int | None = None) -> Iterator[str]:
    """The log as text; when several pods logged, each starts with a `==> pod <==` line."""
    pods = sorted(set(chunks_of(job, pod).values_list("pod", flat=True)))
    for name in pods:
        if len(pods) > 1:
            yield f"==> {name} <==\n"
        if tail is not None:
            yield from _tail(job, name, tail)
        else:
            texts = chunks_of(job, name).order_by("seq").values_list("text", flat=True)
            yield from (_with_newline(text) for text in texts.iterator())
