"""Agents' posts, answered in groups: one token lookup and one transaction for every post that
arrived while the previous group was being stored (a group commit).

A post is answered 202 only once its group has committed, so what an agent was told is stored
is stored; a post that gets no answer (the process died) is sent again by its agent. The
database work runs in asgiref's one sync thread; the event loop meanwhile reads and checks the
next posts. No timer: a group is whatever queued while the last one was stored, so one post
alone is stored at once, and many at once share the round trips.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections, connection

from base.streams import Outgoing, send_all
from monitoring.ingest import Accepted, ingest_batches, node_keys
from monitoring.prefetch import Prefetched
from monitoring.tokens import nodes_for_digests, seen_nodes, token_keys
from monitoring.validation import Batch, Errors, node_errors

log = logging.getLogger(__name__)

# Samples stored by one group at most (a catch-up post alone may hold schema.MAX_GPU_SAMPLES).
GROUP_SAMPLES = 20_000


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]


INTERNAL_ERROR = Reply(500, {"detail": "Internal error."})


@dataclass(frozen=True)
class Received:
    """A post as read on the event loop, its token known (`token_known`) but checked again with
    its group, as it may have been rotated since: the token's digest, the node its body names,
    and the batch or its errors, or the refusal (405, 413, 400) to give once the token is
    known good."""

    digest: str
    named_node: Any = None
    batch: Batch | None = None
    errors: Errors = field(default_factory=dict)
    refusal: Reply | None = None

    @property
    def samples(self) -> int:
        return len(self.batch.gpus) if self.batch else 0


@contextmanager
def _connection_returned() -> Iterator[None]:
    try:
        yield
    finally:
        # As Django does after each request: give the connection back to the pool, or drop a
        # broken one. Not inside a transaction (a test's, when a test posts).
        if not connection.in_atomic_block:
            close_old_connections()


async def token_known(digest: str) -> bool:
    """Whether a node holds this token digest, asked before a post's body is read, so an
    unknown token costs neither reading nor parsing. A digest found before in this process
    passes at once (its group checks it again); another is looked up in the sync thread."""
    return bool(seen_nodes([digest])) or bool(await sync_to_async(_look_up)(digest))


def _look_up(digest: str) -> dict[str, tuple[int, str]]:
    with _connection_returned():
        return nodes_for_digests([digest])


def answer(posts: Sequence[Received]) -> list[tuple[Reply, Outgoing]]:
    """Check each post's token and node, store the good ones together; each post's reply and
    the messages to fan out once the group has committed."""
    with _connection_returned():
        return _answer(posts)


def _answer(posts: Sequence[Received]) -> list[tuple[Reply, Outgoing]]:
    digests = {post.digest for post in posts}
    # The tokens' cache entries and those of the nodes they named before, in one round trip.
    reads = Prefetched([*token_keys(digests), *node_keys(seen_nodes(digests))])
    nodes = nodes_for_digests(digests, reads)
    replies: list[Reply | Accepted] = [_check(post, nodes.get(post.digest)) for post in posts]
    accepted = [a for a in replies if isinstance(a, Accepted)]
    stored = iter(_store(accepted, reads) if accepted else [])
    results: list[tuple[Reply, Outgoing]] = []
    for reply in replies:
        if isinstance(reply, Reply):
            results.append((reply, []))
        elif (outgoing := next(stored)) is None:
            results.append((INTERNAL_ERROR, []))
        else:
            counts = {"accepted": len(reply.batch.gpus), "xids": len(reply.batch.xids)}
            results.append((Reply(202, counts), outgoing))
    return results


def _check(post: Received, node: tuple[int, str] | None) -> Reply | Accepted:
    if node is None:
        return Reply(401, {"detail": "A node token is required (Authorization: Bearer <token>)."})
    if post.refusal is not None:
        return post.refusal
    node_id, name = node
    errors = {**node_errors(post.named_node, name), **post.errors}
    if errors or post.batch is None:
        return Reply(403 if list(errors) == ["node"] else 400, errors)
    return Accepted(node_id, name, post.batch)


def _store(accepted: list[Accepted], reads: Prefetched) -> list[Outgoing | None]:
    """Store the group in one transaction; should that fail, each batch in its own, so one bad
    batch cannot fail its neighbours. None for a batch that could not be stored."""
    try:
        return list(ingest_batches(accepted, reads))
    except DatabaseError:
        log.exception("storing %s batches of %s failed", len(accepted), _nodes(accepted))
        if len(accepted) == 1:
            return [None]
        return [stored for one in accepted for stored in _store([one], reads)]


def _nodes(accepted: list[Accepted]) -> str:
    return ", ".join(sorted({a.node for a in accepted}))


Answered = tuple[Reply, "asyncio.Future[None]"]  # the reply; done once its group fanned out


class _Queue:
    """Posts waiting for the next group of one event loop, and the task storing groups."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Received, asyncio.Future[Answered]]] = []
        self.task: asyncio.Task[None] | None = None

    def take(self) -> list[tuple[Received, asyncio.Future[Answered]]]:
        count, samples = 0, 0
        while count < len(self.waiting) and (count == 0 or samples < GROUP_SAMPLES):
            samples += self.waiting[count][0].samples
            count += 1
        group, self.waiting = self.waiting[:count], self.waiting[count:]
        return group


_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()


async def submit(post: Received) -> Answered:
    """Queue a post for the next group; its reply once the group is stored."""
    loop = asyncio.get_running_loop()
    queue = _queues.setdefault(loop, _Queue())
    answered: asyncio.Future[Answered] = loop.create_future()
    queue.waiting.append((post, answered))
    if queue.task is None:
        queue.task = loop.create_task(_drain(queue))
    return await answered


async def _drain(queue: _Queue) -> None:
    """Store groups one after the other; a group's fan-out runs while the next is stored (in
    the sync thread), and before the next group's fan-out starts, so messages keep their order."""
    fanning: asyncio.Task[None] | None = None
    try:
        while queue.waiting or fanning is not None:
            if not queue.waiting and fanning is not None:
                await fanning  # posts arriving meanwhile are taken on the next turn
                fanning = None
                continue
            group = queue.take()
            results = await _answer_group(group)
            if fanning is not None:
                await fanning
            fanning = asyncio.create_task(_fan_out(group, results))
    finally:
        queue.task = None  # no await since the loop's check: no post is left waiting


async def _answer_group(
    group: list[tuple[Received, asyncio.Future[Answered]]],
) -> list[tuple[Reply, Outgoing]]:
    try:
        return await sync_to_async(answer)([post for post, _ in group])
    except Exception:
        log.exception("answering %s agent posts failed", len(group))
        return [(INTERNAL_ERROR, [])] * len(group)


async def _fan_out(
    group: list[tuple[Received, asyncio.Future[Answered]]], results: list[tuple[Reply, Outgoing]]
) -> None:
    fanned_out: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for (_, answered), (reply, _) in zip(group, results, strict=True):
        if not answered.done():
            answered.set_result((reply, fanned_out))
    try:
        await send_all([message for _, outgoing in results for message in outgoing])
    except Exception:
        log.exception("fan-out of %s agent posts failed", len(group))
    finally:
        fanned_out.set_result(None)
