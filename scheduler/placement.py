"""Gang placement: all of a job's pods at once, on as few nodes and topology domains as possible.

Order of preference, as in the design: one node (the tightest that fits, so whole free nodes stay
whole for large jobs), then the fewest nodes inside one topology domain (narrowest label first),
then the fewest nodes across domains. A job of `nodes` x `gpus_per_node` may put several of its
pods on one node; the placement is node -> GPUs.

`extra` adds GPUs to some nodes for one question ("would it fit if these were free?"): GPUs lent
from backfill holds, or GPUs of preemption victims.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.model import Placement
from scheduler.pool import NodePool

Candidate = tuple[str, int]
"""A node name and its free GPUs as seen by this question."""


def find_placement(
    pool: NodePool, nodes: int, gpus_per_node: int, extra: Mapping[str, int] | None = None
) -> Placement | None:
    single = _tightest_single(pool, nodes * gpus_per_node, extra)
    if single is not None:
        return ((single, nodes * gpus_per_node),)
    if nodes == 1:
        return None
    candidates = _candidates(pool, gpus_per_node, extra)
    if sum(free // gpus_per_node for _, free in candidates) < nodes:
        return None
    levels = len(next(iter(pool.domains.values()), ()))
    for level in range(levels):
        best = _best_domain(pool, candidates, level, nodes, gpus_per_node)
        if best is not None:
            return best
    return _fewest_nodes(candidates, nodes, gpus_per_node)


def _tightest_single(pool: NodePool, need: int, extra: Mapping[str, int] | None) -> str | None:
    found = pool.tightest(need, extra)
    best = None if found is None else (found[1], found[0])
    for name, gpus in (extra or {}).items():
        free = pool.free[name] + gpus
        if free >= need and (best is None or (free, name) < best):
            best = (free, name)
    return None if best is None else best[1]


def _candidates(
    pool: NodePool, gpus_per_node: int, extra: Mapping[str, int] | None
) -> list[Candidate]:
    if not extra:
        return list(pool.nodes_with(gpus_per_node))
    found = [(name, free + extra.get(name, 0)) for name, free in pool.nodes_with(gpus_per_node)]
    seen = {name for name, _ in found}
    for name, gpus in extra.items():
        free = pool.free[name] + gpus
        if name not in seen and free >= gpus_per_node:
            found.append((name, free))
    return found


def _best_domain(
    pool: NodePool, candidates: list[Candidate], level: int, nodes: int, gpus_per_node: int
) -> Placement | None:
    by_domain: dict[str, list[Candidate]] = {}
    for name, free in candidates:
        domain = pool.domains[name][level]
        if domain:
            by_domain.setdefault(domain, []).append((name, free))
    best: tuple[tuple[int, int, str], Placement] | None = None
    for domain in sorted(by_domain):
        placement = _fewest_nodes(by_domain[domain], nodes, gpus_per_node)
        if placement is None:
            continue
        score = (len(placement), _whole_nodes_broken(pool, placement), domain)
        if best is None or score < best[0]:
            best = (score, placement)
    return None if best is None else best[1]


def _fewest_nodes(candidates: list[Candidate], nodes: int, gpus_per_node: int) -> Placement | None:
    """Largest nodes first (fewest nodes); the last pick is the tightest node that completes it."""
    ranked = sorted(candidates, key=lambda c: (-(c[1] // gpus_per_node), c[0]))
    chosen: list[tuple[str, int]] = []
    missing = nodes
    for index, (name, free) in enumerate(ranked):
        pods = free // gpus_per_node
        if pods >= missing:
            last = _tightest_completion(ranked[index:], missing, gpus_per_node) or name
            chosen.append((last, missing * gpus_per_node))
            return tuple(sorted(chosen))
        chosen.append((name, pods * gpus_per_node))
        missing -= pods
    return None


def _tightest_completion(rest: list[Candidate], pods: int, gpus_per_node: int) -> str | None:
    fitting = [(free, name) for name, free in rest if free // gpus_per_node >= pods]
    return min(fitting)[1] if fitting else None


def _whole_nodes_broken(pool: NodePool, placement: Placement) -> int:
    return sum(
        1
        for node, gpus in placement
        if pool.free[node] == pool.total[node] and gpus < pool.total[node]
    )
