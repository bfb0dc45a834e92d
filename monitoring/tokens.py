"""Node tokens: issued once, stored as sha256, looked up per post through the cache."""

from __future__ import annotations

import hashlib
import secrets

from django.core.cache import cache
from django.db import transaction

from audit.record import record
from cluster.models import Node

TOKEN_PREFIX = "gpn_"
CACHE_SECONDS = 60  # a rotated token may work this long on other web processes (locmem cache)


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


def node_for_token(raw: str) -> tuple[int, str] | None:
    """(id, name) of the node holding this token, or None."""
    digest = token_hash(raw)
    key = _cache_key(digest)
    found = cache.get(key)
    if found is None:
        node = Node.objects.filter(agent_token_hash=digest).values_list("id", "name").first()
        if node is None:
            return None
        found = node
        cache.set(key, found, CACHE_SECONDS)
    return found[0], found[1]
