"""Everything pushed to websockets: the group names (which carry the team), typed messages, and
the sends every app uses.

Groups
- `team.<team_id>.jobs`: every job of a team (job.status, team.usage).
- `team.<team_id>.job.<job_id>`: one job (job.status, job.log, job.metrics).
- `cluster.nodes`: every node and GPU, for platform admins (cluster.gpus, cluster.xid).

A message's `type` names the consumer handler (`job.status` -> `job_status`) and is kept when
forwarded to the browser, so the browser dispatches on the same names.

Delivery: status and usage are snapshots (the newest wins); metrics are coalesced per GPU
(drop-oldest for a slow browser); log chunks are never dropped: the consumer fills any gap from
the persisted `JobLogChunk` rows, so a lost or late message costs a query, not a line.
What builds messages from jobs lives in jobs/streams.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)
CLUSTER_GROUP = "cluster.nodes"


class JobStatusMessage(TypedDict):
    """Sent when a job changes state; carries what the team's job list shows of it."""

    type: Literal["job.status"]
    job_id: int
    name: str
    owner: str
    state: str
    reason: str
    at: str
    gpus: int
    gpu_type: str
    queue: str
    queue_priority: int
    submitted_at: str
    pending_code: str
    pending_message: str
    pending_figures: dict[str, Any]  # the reason's figures; consumers render it per reader
    estimated_start: str | None  # ISO 8601, for waiting jobs the scheduler could estimate


class JobWaitingMessage(TypedDict):
    """Sent when a waiting job's reason, figures (its places in the queue among them) or
    estimate change without a change of state."""

    type: Literal["job.waiting"]
    job_id: int
    state: Literal["QUEUED"]
    pending_code: str
    pending_message: str
    pending_figures: dict[str, Any]
    estimated_start: str | None
    estimated_start_latest: str | None


class UsageRowPayload(TypedDict):
    gpu_type: str
    used: int
    guaranteed: int
    limit: int


class TeamUsageMessage(TypedDict):
    """Sent to a team's group after its jobs change state: GPUs held against quota, per type."""

    type: Literal["team.usage"]
    team: str
    rows: list[UsageRowPayload]


class JobLogMessage(TypedDict):
    """One persisted log chunk of one pod: `lines` are numbered from `first_line`."""

    type: Literal["job.log"]
    job_id: int
    chunk_id: int
    pod: str
    seq: int
    first_line: int
    lines: list[str]


class GpuReading(TypedDict):
    """The latest sample of one GPU, in the portal's short names (null: not offered)."""

    node: str
    index: int
    at: float  # Unix time the agent read it
    util: float | None  # percent
    sm_active: float | None  # ratio 0..1 (GPM, Hopper and later)
    fb_used: float | None  # MiB
    fb_total: float | None  # MiB
    temp: float | None  # °C
    power: float | None  # W
    job_id: int | None


class JobMetricsMessage(TypedDict):
    """The newest readings of a job's GPUs on one node."""

    type: Literal["job.metrics"]
    job_id: int
    gpus: list[GpuReading]


class ClusterGpusMessage(TypedDict):
    """The newest readings of every GPU of one node (admins)."""

    type: Literal["cluster.gpus"]
    node: str
    gpus: list[GpuReading]


class XidMessage(TypedDict):
    """An Xid a GPU reported; `fatal` ones mark it unhealthy (admins)."""

    type: Literal["cluster.xid"]
    node: str
    index: int
    xid: int
    fatal: bool
    at: float


def team_group(team_id: int) -> str:
    return f"team.{team_id}.jobs"


def job_group(team_id: int, job_id: int) -> str:
    return f"team.{team_id}.job.{job_id}"


Outgoing = Sequence[tuple[str, Any]]


async def send_all(messages: Outgoing) -> None:
    """Group-send each (group, message); for code already on the event loop. The Redis layer
    (base.channel_layer) sends them all in two round trips; others one by one, concurrently."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return
    if hasattr(layer, "group_send_many"):
        await layer.group_send_many([(group, dict(msg)) for group, msg in messages])
    else:
        await asyncio.gather(*(layer.group_send(group, dict(msg)) for group, msg in messages))


_own = threading.local()


@contextmanager
def own_event_loop() -> Iterator[None]:
    """Send from this thread on an event loop of its own, kept for the whole block: for a
    long-running loop without one (the controller's).

    Elsewhere `async_to_sync` starts a new event loop for every send from such a thread, and the
    Redis layer a new connection with it: that was about 6 % of the controller's CPU.
    Sync code under an ASGI server needs none of this (its sends go to the server's loop).
    """
    loop = asyncio.new_event_loop()
    _own.loop = loop
    try:
        yield
    finally:
        _own.loop = None
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def send_now(messages: Outgoing) -> None:
    """Group-send each (group, message) from sync code, all in one hop; returns once sent.

    What goes out is a copy of what the database holds (see Delivery above), so a send that
    fails (Redis away) is logged and dropped: the change it reports has committed, and the
    process that made it (the controller) carries on.
    """
    loop: asyncio.AbstractEventLoop | None = getattr(_own, "loop", None)
    try:
        if loop is None:
            async_to_sync(send_all)(messages)
        else:
            loop.run_until_complete(send_all(messages))
    except Exception as exc:
        log.warning("live messages not sent (%d): %s", len(messages), exc)


def send_on_commit(messages: Outgoing) -> None:
    """Group-send each (group, message) after the transaction commits, all in one hop."""
    if messages:
        transaction.on_commit(lambda: send_now(messages))


def log_message(chunk: Any) -> JobLogMessage:
    return {
        "type": "job.log",
        "job_id": chunk.job_id,
        "chunk_id": chunk.pk,
        "pod": chunk.pod,
        "seq": chunk.seq,
        "first_line": chunk.first_line,
        "lines": chunk.text.splitlines(),
    }


def publish_log_chunks(chunks: Sequence[Any]) -> None:
    """Stream persisted `cluster.models.JobLogChunk`s to their jobs' groups once they commit.

    The controller calls this right after saving the chunks, inside or outside a transaction.
    """
    send_on_commit([(job_group(c.team_id, c.job_id), log_message(c)) for c in chunks])


def publish_log_chunk(chunk: Any) -> None:
    publish_log_chunks([chunk])
