"""The latest sample of every GPU, one cache entry per node (shared by web processes through
Redis): a batch of a node reads and writes one key, not one per GPU. A node's latest node-level
reading (its driver, its InfiniBand ports) is a second entry beside it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.cache import cache

from monitoring.prefetch import CacheReads

LATEST_SECONDS = 3600  # a node silent this long shows as unknown rather than stale

Samples = dict[int, dict[str, Any]]  # GPU index -> its latest sample


def key(node_id: int) -> str:
    return f"monitoring.latest.{node_id}"


def host_key(node_id: int) -> str:
    return f"monitoring.host.{node_id}"


def hosts(node_ids: Iterable[int], reads: CacheReads = cache) -> dict[int, dict[str, Any]]:
    """{node id: its latest node-level reading} of the nodes that sent one."""
    keys = {host_key(node_id): node_id for node_id in node_ids}
    return {keys[k]: reading for k, reading in reads.get_many(keys).items()}


def of_nodes(node_ids: Iterable[int], reads: CacheReads = cache) -> dict[int, Samples]:
    """{node id: {index: sample}} of the nodes that have any."""
    keys = {key(node_id): node_id for node_id in node_ids}
    return {keys[k]: samples for k, samples in reads.get_many(keys).items()}


def latest(pairs: Iterable[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
    """{(node id, index): sample} of the GPUs that have one."""
    wanted = list(pairs)
    nodes = of_nodes({node_id for node_id, _ in wanted})
    return {
        (node_id, index): nodes[node_id][index]
        for node_id, index in wanted
        if index in nodes.get(node_id, {})
    }


def store(nodes: dict[int, Samples], readings: dict[int, dict[str, Any]] | None = None) -> None:
    """Keep these as the nodes' latest samples (all of a node's GPUs: the entry is replaced)
    and, where given, their latest node-level readings."""
    entries: dict[str, Any] = {key(node_id): samples for node_id, samples in nodes.items()}
    entries.update((host_key(node_id), r) for node_id, r in (readings or {}).items())
    cache.set_many(entries, LATEST_SECONDS)
