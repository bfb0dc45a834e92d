"""Cache entries read together: one round trip for what a group of batches needs to know."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from django.core.cache import cache


class CacheReads(Protocol):
    def get_many(self, keys: Iterable[str]) -> dict[str, Any]: ...


class Prefetched:
    """Answers `get_many` from the entries read up front; reads only keys not asked before."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._asked: set[str] = set()
        self._found: dict[str, Any] = {}
        self.prefetch(keys)

    def prefetch(self, keys: Iterable[str]) -> None:
        """Read, in one round trip, those of these keys not read yet."""
        if missing := [key for key in keys if key not in self._asked]:
            self._found.update(cache.get_many(missing))
            self._asked.update(missing)

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        wanted = list(keys)
        self.prefetch(wanted)
        return {key: self._found[key] for key in wanted if key in self._found}
