"""Batches waiting to be sent: bounded, oldest dropped first, merged into few posts."""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections import deque
from typing import Any

from agent.transport import Transport, TransportError

log = logging.getLogger(__name__)
MAX_SAMPLES_PER_POST = 2000


class Backoff:
    """Doubling delay, less up to a fifth at random: agents that lost the portal together do not
    return together, and none waits longer than `maximum`."""

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial, self.maximum = initial, maximum
        self.delay = 0.0

    def failed(self) -> float:
        self.delay = min(self.maximum, self.delay * 2 or self.initial)
        return self.delay * random.uniform(0.8, 1.0)

    def succeeded(self) -> None:
        self.delay = 0.0


class Outbox:
    """Samples, Xid events and the node's newest node-level reading not yet accepted by the
    portal (a node-level reading describes the node now, so a newer one replaces it).

    Every post has an identity: the node, this agent's start (`boot`) and a sequence number.
    A post whose answer did not come is sent again as it was, under the same identity, before
    anything newer, so the portal, which keeps the last number it stored of each start, can tell
    a resend from a new batch and count it once.
    """

    def __init__(
        self, node: str, interval: float, max_batches: int, boot: str | None = None
    ) -> None:
        self.node, self.interval = node, interval
        self.boot = boot or uuid.uuid4().hex
        self._posts = 0
        self._unanswered: tuple[dict[str, Any], tuple[int, int, int]] | None = None
        # Entries carry a sequence number, so what was sent is forgotten exactly, even when
        # the full deque dropped its oldest entries while the post was on its way.
        self._samples: deque[tuple[int, list[dict[str, Any]]]] = deque(maxlen=max_batches)
        self._xids: deque[tuple[int, dict[str, Any]]] = deque(maxlen=1000)
        self._node_reading: tuple[int, dict[str, Any]] | None = None
        self._lock = threading.Lock()
        self._seq = 0
        self.dropped = 0

    def add_samples(self, gpus: list[dict[str, Any]]) -> None:
        with self._lock:
            if len(self._samples) == self._samples.maxlen:
                self.dropped += len(self._samples[0][1])
            self._seq += 1
            self._samples.append((self._seq, gpus))

    def add_xid(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._seq += 1
            self._xids.append((self._seq, event))

    def set_node_reading(self, reading: dict[str, Any]) -> None:
        with self._lock:
            self._seq += 1
            self._node_reading = (self._seq, reading)

    def pending(self) -> int:
        with self._lock:
            return len(self._samples) + len(self._xids) + (self._unanswered is not None)

    def send(self, transport: Transport) -> int:
        """Send what waits, oldest first, until empty; return the GPU samples delivered."""
        delivered = 0
        while True:
            batch, last_seq = self._next_post()
            if last_seq[:2] == (0, 0):
                return delivered
            try:
                transport.post(batch)
            except TransportError as exc:
                if exc.retry:
                    raise
                log.error("portal refused a batch, dropping it: %s", exc)
            self._forget(last_seq)
            delivered += len(batch["gpus"])

    def _next_post(self) -> tuple[dict[str, Any], tuple[int, int, int]]:
        """The post last sent without an answer, or a new one: the oldest waiting samples (up
        to a post's worth), every waiting Xid, the node-level reading if one waits, and the
        last sequence number taken of each (0 for none)."""
        if self._unanswered is not None:
            return self._unanswered
        with self._lock:
            xids = [event for _, event in self._xids]
            last_xid = self._xids[-1][0] if self._xids else 0
            gpus: list[dict[str, Any]] = []
            last_sample = 0
            for seq, sample in self._samples:
                if gpus and len(gpus) + len(sample) > MAX_SAMPLES_PER_POST:
                    break
                gpus += sample
                last_sample = seq
            node_seq, reading = self._node_reading or (0, None)
        if (last_sample, last_xid) == (0, 0):
            return {}, (0, 0, 0)
        self._posts += 1
        body = {
            "node": self.node,
            "boot": self.boot,
            "seq": self._posts,
            "interval": self.interval,
            "gpus": gpus,
            "xids": xids,
        }
        if reading is not None:
            body["host"] = reading
        self._unanswered = (body, (last_sample, last_xid, node_seq))
        return self._unanswered

    def _forget(self, last_seq: tuple[int, int, int]) -> None:
        self._unanswered = None
        last_sample, last_xid, node_seq = last_seq
        with self._lock:
            if self._node_reading is not None and self._node_reading[0] <= node_seq:
                self._node_reading = None
            while self._samples and self._samples[0][0] <= last_sample:
                self._samples.popleft()
            while self._xids and self._xids[0][0] <= last_xid:
                self._xids.popleft()
