"""The price book as of a report: each GPU type's prices over time and each queue's multiplier.

A segment's cost is its GPU-hours at the prices in effect while it ran: split where a price
changes, each piece at its own price, times its queue's multiplier.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, date, datetime, time
from decimal import Decimal
from itertools import pairwise

from django.conf import settings

from billing.models import GpuPrice, QueueMultiplier
from quotas.models import GpuType

ONE = Decimal(1)
SECONDS_PER_HOUR = Decimal(3600)


def currency() -> str:
    """The portal's one currency (ISO 4217 code)."""
    return str(settings.BILLING_CURRENCY)


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


class PriceBook:
    """Prices by GPU type over time (a type's own price before its first entry) and queue
    multipliers, read once for a whole report."""

    def __init__(
        self,
        base: dict[int, Decimal],
        changes: dict[int, list[tuple[datetime, Decimal]]],
        multipliers: dict[int, Decimal],
    ) -> None:
        self._base = base
        self._changes = changes
        self._moments = {
            gpu_type: [at for at, _ in entries] for gpu_type, entries in changes.items()
        }
        self._multipliers = multipliers

    @classmethod
    def load(cls) -> PriceBook:
        base = dict(GpuType.objects.values_list("id", "price_per_gpu_hour"))
        changes: dict[int, list[tuple[datetime, Decimal]]] = defaultdict(list)
        for gpu_type, day, price in GpuPrice.objects.order_by("effective_from").values_list(
            "gpu_type_id", "effective_from", "price_per_gpu_hour"
        ):
            changes[gpu_type].append((day_start(day), price))
        multipliers = dict(QueueMultiplier.unscoped.values_list("queue_id", "multiplier"))
        return cls(base, dict(changes), multipliers)

    def multiplier(self, queue_id: int) -> Decimal:
        return self._multipliers.get(queue_id, ONE)

    def price_at(self, gpu_type_id: int, at: datetime) -> Decimal:
        moments = self._moments.get(gpu_type_id, [])
        index = bisect_right(moments, at)
        if index == 0:
            return self._base.get(gpu_type_id, Decimal(0))
        return self._changes[gpu_type_id][index - 1][1]

    def changes_between(self, gpu_type_id: int, start: datetime, end: datetime) -> list[datetime]:
        """The moments strictly inside (start, end) at which the type's price changes."""
        return [at for at in self._moments.get(gpu_type_id, []) if start < at < end]

    def all_changes_between(self, start: datetime, end: datetime) -> list[datetime]:
        """The moments strictly inside (start, end) at which any type's price changes."""
        moments = {at for entries in self._moments.values() for at in entries}
        return sorted(at for at in moments if start < at < end)

    def pieces(
        self, gpu_type_id: int, start: datetime, end: datetime
    ) -> Iterator[tuple[datetime, datetime, Decimal]]:
        """[start, end) split where the price changes: (from, to, price per GPU-hour)."""
        bounds = [start, *self.changes_between(gpu_type_id, start, end), end]
        for begin, finish in pairwise(bounds):
            yield begin, finish, self.price_at(gpu_type_id, begin)


def cost(gpu_seconds: Decimal, price: Decimal, multiplier: Decimal) -> Decimal:
    # Multiplied first (exact) and divided last: a cost that ends on half a cent is exactly
    # that, not a hair under it, so it rounds as it should.
    return gpu_seconds * price * multiplier / SECONDS_PER_HOUR
