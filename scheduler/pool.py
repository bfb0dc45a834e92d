"""Free GPUs of the schedulable nodes of one GPU type, indexed by free count.

Why an index: a cycle tries thousands of jobs against hundreds of nodes. Keeping node names in
buckets by free count makes "the tightest node with at least n free" and "how many pods of g GPUs
fit at once" cost O(GPUs per node) instead of O(nodes), whatever the cluster size.

Reservations for blocked jobs are *holds*: GPUs taken out of `free` that a later job may still use
if, by its runtime limit, it ends before the reservation starts (backfill).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from scheduler.model import JobId, NodeState, Placement


@dataclass(slots=True)
class Hold:
    job_id: JobId
    start: float
    gpus: int


class NodePool:
    def __init__(
        self,
        totals: Mapping[str, int],
        domains: Mapping[str, tuple[str, ...]],
        free: Mapping[str, int] | None = None,
    ) -> None:
        """Nodes with their total and free GPUs (all free unless `free` says otherwise)."""
        self.total: Mapping[str, int] = dict(totals)
        self.free: dict[str, int] = dict(free if free is not None else totals)
        self.max_gpus = max(self.total.values(), default=0)
        self.domains = domains
        """Node -> its domain per topology key ("" where the label is missing)."""
        self._buckets: list[list[str]] = [[] for _ in range(self.max_gpus + 1)]
        for name in sorted(self.free):
            self._buckets[self.free[name]].append(name)
        self.free_total = sum(self.free.values())
        self._pods: dict[int, int] = {}
        """Pods per size, valid until the next change (many questions, few changes)."""
        self.version = 0
        """Bumped on every change, so callers can cache answers about the pool."""
        self.gains = 0
        """Bumped when GPUs come back: until then, what did not fit will not fit (taking GPUs
        or holding them for a reservation only ever removes room)."""
        self._held_cache: tuple[int, dict[str, int], Hold | None] = (-1, {}, None)
        self.holds: dict[str, list[Hold]] = {}
        self.held_total = 0
        self.latest_hold = float("-inf")

    @classmethod
    def from_nodes(cls, nodes: Iterable[NodeState], topology_keys: tuple[str, ...]) -> NodePool:
        listed = list(nodes)
        return cls(
            {n.name: n.total_gpus for n in listed},
            {n.name: tuple(n.labels.get(k, "") for k in topology_keys) for n in listed},
            {n.name: max(0, min(n.free_gpus, n.total_gpus)) for n in listed},
        )

    def copy(self) -> NodePool:
        # made through __init__ with no nodes, then filled: a class compiled by mypyc (the
        # production image's scheduler) cannot be made by __new__ alone
        clone = NodePool({}, self.domains)
        clone.total = self.total
        clone.free = dict(self.free)
        clone.domains = self.domains
        clone.max_gpus = self.max_gpus
        clone._buckets = [list(b) for b in self._buckets]
        clone.free_total = self.free_total
        clone._pods = {}
        clone.version = 0
        clone.gains = 0
        clone._held_cache = (-1, {}, None)
        clone.holds = {}
        clone.held_total = 0
        clone.latest_hold = float("-inf")
        return clone

    def set_free(self, node: str, value: int) -> None:
        old = self.free[node]
        if old == value:
            return
        self._pods.clear()
        self.version += 1
        bucket = self._buckets[old]
        del bucket[bisect_left(bucket, node)]
        insort(self._buckets[value], node)
        self.free[node] = value
        self.free_total += value - old

    def take(self, placement: Placement) -> None:
        for node, gpus in placement:
            self.set_free(node, self.free[node] - gpus)

    def take_clamped(self, placement: Placement) -> None:
        """Take what is there; projections may lag the real state by a few GPUs."""
        for node, gpus in placement:
            self.set_free(node, max(0, self.free[node] - gpus))

    def give(self, placement: Placement) -> None:
        self.gains += 1
        for node, gpus in placement:
            if node in self.free:
                self.set_free(node, min(self.total[node], self.free[node] + gpus))

    def tightest(self, need: int, skip: Mapping[str, int] | None = None) -> tuple[str, int] | None:
        """The node with the fewest free GPUs that still has `need` (ties: name order)."""
        for count in range(need, self.max_gpus + 1):
            for name in self._buckets[count]:
                if skip is None or name not in skip:
                    return name, count
        return None

    def nodes_with(self, at_least: int) -> Iterator[tuple[str, int]]:
        for count in range(max(at_least, 1), self.max_gpus + 1):
            for name in self._buckets[count]:
                yield name, count

    def pods(self, gpus_per_node: int) -> int:
        """How many pods of `gpus_per_node` fit at once, one pod per node (a gang's pods never
        share a node, `scheduler.placement`): the nodes with that many GPUs free."""
        cached = self._pods.get(gpus_per_node)
        if cached is None:
            buckets = self._buckets
            cached = sum(len(buckets[c]) for c in range(max(gpus_per_node, 1), self.max_gpus + 1))
            self._pods[gpus_per_node] = cached
        return cached

    def bucket_counts(self) -> list[int]:
        """Nodes per free count, a picture of the pool to compare with later."""
        return [len(bucket) for bucket in self._buckets]

    def largest_free(self) -> int:
        for count in range(self.max_gpus, 0, -1):
            if self._buckets[count]:
                return count
        return 0

    def hold(self, job_id: JobId, placement: Placement, start: float) -> None:
        """Keep GPUs free now for a job reserved to start at `start`."""
        for node, gpus in placement:
            held = min(gpus, self.free[node])
            if held:
                self.set_free(node, self.free[node] - held)
                self.holds.setdefault(node, []).append(Hold(job_id, start, held))
                self.held_total += held
                self.version += 1
        self.latest_hold = max(self.latest_hold, start)

    def lendable_total(self, end: float) -> int:
        if not self.held_total or end > self.latest_hold:
            return 0
        return sum(h.gpus for holds in self.holds.values() for h in holds if h.start >= end)

    def lendable(self, end: float) -> dict[str, int]:
        """Held GPUs a job ending at `end` may use without delaying any reservation."""
        extra: dict[str, int] = {}
        for node, holds in self.holds.items():
            gpus = sum(h.gpus for h in holds if h.start >= end)
            if gpus:
                extra[node] = gpus
        return extra

    def first_blocking_hold(self, end: float) -> Hold | None:
        """The earliest reservation a job ending at `end` would delay if it used held GPUs."""
        first = self._held()[2]
        return first if first is not None and first.start < end else None

    def held_by_node(self) -> dict[str, int]:
        return self._held()[1]

    def _held(self) -> tuple[int, dict[str, int], Hold | None]:
        if self._held_cache[0] != self.version:
            holds = [h for hs in self.holds.values() for h in hs if h.gpus]
            by_node = {node: sum(h.gpus for h in hs) for node, hs in self.holds.items()}
            first = min(holds, key=lambda h: (h.start, h.job_id), default=None)
            self._held_cache = (self.version, by_node, first)
        return self._held_cache

    def take_with_holds(self, placement: Placement, end: float) -> None:
        """Take free GPUs first, then GPUs lent from holds that start after `end`."""
        for node, gpus in placement:
            own = min(gpus, self.free[node])
            self.set_free(node, self.free[node] - own)
            missing = gpus - own
            for held in sorted(self.holds.get(node, ()), key=lambda h: -h.start):
                if missing <= 0:
                    break
                if held.start >= end:
                    lent = min(missing, held.gpus)
                    held.gpus -= lent
                    missing -= lent
                    self.held_total -= lent
                    self.version += 1
