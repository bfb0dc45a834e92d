"""The latest sample of every GPU, kept in the cache (shared by web processes through Redis)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.cache import cache

LATEST_SECONDS = 3600  # a GPU silent this long shows as unknown rather than stale


def key(node_id: int, index: int) -> str:
    return f"monitoring.latest.{node_id}.{index}"


def latest(pairs: Iterable[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
    """{(node id, index): sample} of the GPUs that have one."""
    keys = {key(n, i): (n, i) for n, i in pairs}
    return {keys[k]: v for k, v in cache.get_many(list(keys)).items()}


def store(samples: dict[tuple[int, int], dict[str, Any]]) -> None:
    """Keep these as the latest samples of their (node id, index)."""
    cache.set_many({key(n, i): sample for (n, i), sample in samples.items()}, LATEST_SECONDS)
