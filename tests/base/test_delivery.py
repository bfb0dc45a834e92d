"""A slow browser: metrics keep only the newest per GPU set, log chunks are never lost."""

from __future__ import annotations

from typing import Any

from base.delivery import MAX_QUEUED_LOG_CHUNKS, Delivery


def metrics(util: int, node: str = "n1") -> dict[str, Any]:
    return {"type": "job.metrics", "job_id": 1, "gpus": [{"node": node, "util": util}]}


def chunk(seq: int, pod: str = "p") -> dict[str, Any]:
    return {"type": "job.log", "pod": pod, "seq": seq, "lines": [f"{pod}{seq}"]}


async def test_a_slow_client_gets_only_the_newest_metrics_of_each_node() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    delivery = Delivery(send)
    for util in (10, 20, 30):
        delivery.put(metrics(util))
    delivery.put(metrics(99, node="n2"))
    await delivery.drain()
    assert [(m["gpus"][0]["node"], m["gpus"][0]["util"]) for m in sent] == [("n1", 30), ("n2", 99)]
    assert delivery.superseded == 2


async def test_log_chunks_that_overflow_the_queue_are_filled_from_storage() -> None:
    sent: list[dict[str, Any]] = []
    stored = {seq: chunk(seq) for seq in range(1, MAX_QUEUED_LOG_CHUNKS + 101)}
    asked: list[tuple[str, int, int | None]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def fill_gap(pod: str, after: int, before: int | None) -> list[dict[str, Any]]:
        asked.append((pod, after, before))
        return [stored[s] for s in sorted(stored) if after < s < (before or 10**9)]

    delivery = Delivery(send, fill_gap)
    for seq in sorted(stored):  # the browser reads nothing while 600 chunks arrive
        delivery.put(stored[seq])
        delivery.put(metrics(seq))
    await delivery.drain()
    logs = [m["seq"] for m in sent if m["type"] == "job.log"]
    assert logs == sorted(stored)  # every chunk once, in order
    assert asked == [("p", -1, 101)]  # the 100 the full queue dropped came from storage
    assert [m["gpus"][0]["util"] for m in sent if m["type"] == "job.metrics"] == [600]


async def test_a_chunk_already_sent_is_not_sent_again() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    delivery = Delivery(send)
    delivery.positions["p"] = 2  # replayed on connect
    for seq in (2, 3, 3):
        delivery.put(chunk(seq))
    await delivery.drain()
    assert [m["seq"] for m in sent] == [3]
