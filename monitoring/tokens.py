"""Node tokens: issued once, stored as sha256, looked up through the cache."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection, Iterable

from django.core.cache import cache
from django.db import transaction

from audit.record import record
from cluster.models import Node
from monitoring.prefetch import CacheReads

TOKEN_PREFIX = "gpn_"
CACHE_SECONDS = 60  # with a local-memory cache, a rotated token works this long elsewhere


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _cache_key(digest: str) -> str:
    return f"monitoring.node-token.{digest}"


def rotate_node_token(node: Node) -> str:
    """Issue a new token for a node (the old one stops working); return it, shown once."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(pk=node.pk)
        old = locked.agent_token_hash
        locked.agent_token_hash = token_hash(raw)
        locked.save(update_fields=["agent_token_hash", "updated_at"])
        record("node.token", actor=None, team=None, target=locked)
    if old:
        cache.delete(_cache_key(old))
    node.agent_token_hash = locked.agent_token_hash
    return raw


# Digest -> node, as found: a digest names one node for good (whether it may still post is
# asked every time), so a group's reads of its nodes can go with the tokens' in one trip.
_seen: dict[str, tuple[int, str]] = {}
SEEN_MAX = 100_000


def token_keys(digests: Iterable[str]) -> list[str]:
    return [_cache_key(digest) for digest in digests]


def seen_nodes(digests: Iterable[str]) -> list[tuple[int, str]]:
    """The nodes these digests named when last found (maybe revoked since)."""
    return [_seen[digest] for digest in digests if digest in _seen]


def nodes_for_digests(
    digests: Collection[str], reads: CacheReads = cache
) -> dict[str, tuple[int, str]]:
    """{token digest: (node id, name)} for the digests a node holds now, from the cache (one
    read for all) or else the database. A rotation deletes the old digest's entry, so a
    revoked token stops working at once on every web process sharing the cache."""
    keys = {_cache_key(digest): digest for digest in digests}
    found = {keys[key]: (node[0], node[1]) for key, node in reads.get_many(keys).items()}
    missing = set(keys.values()) - found.keys()
    if missing:
        rows = Node.objects.filter(agent_token_hash__in=missing).values_list(
            "agent_token_hash", "id", "name"
        )
        fresh = {digest: (pk, name) for digest, pk, name in rows}
        cache.set_many({_cache_key(d): node for d, node in fresh.items()}, CACHE_SECONDS)
        found.update(fresh)
    if len(_seen) > SEEN_MAX:
        _seen.clear()
    _seen.update(found)
    return found
