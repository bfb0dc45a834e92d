"""Gang placement: all of a job's pods at once, each where Kubernetes will run it.

A job of `nodes` x `gpus_per_node` is one Indexed Job: one pod template for every pod, pinned to
the placed nodes with at most one pod per node (`cluster.manifests`). A template cannot say
"pods 0 and 1 on node a, pod 2 on node b", so the only placements Kubernetes follows exactly are
"all pods on one node" and "one pod per node". All on one node would put every pod's CPU and
memory on that node, which this scheduler does not count, and a pod that did not fit would stay
Pending while its peers wait for it; one pod per node leaves the manifest's rule as it is. So a
multi-pod job takes `gpus_per_node` GPUs on each of `nodes` distinct nodes.

Order of preference: for a single pod, the tightest node that fits (whole free nodes stay whole
for large jobs); for a gang, one topology domain (narrowest label first), then any nodes, always
breaking as few whole free nodes as possible. The placement is node -> GPUs.

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
    if nodes == 1:
        single = _tightest_single(pool, gpus_per_node, extra)
        return None if single is None else ((single, gpus_per_node),)
    candidates = _candidates(pool, gpus_per_node, extra)
    if len(candidates) < nodes:
        return None
    levels = len(next(iter(pool.domains.values()), ()))
    for level in range(levels):
        best = _best_domain(pool, candidates, level, nodes, gpus_per_node)
        if best is not None:
            return best
    return _tightest_nodes(pool, candidates, nodes, gpus_per_node)


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
    """Nodes with room for one pod."""
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
        placement = _tightest_nodes(pool, by_domain[domain], nodes, gpus_per_node)
        if placement is None:
            continue
        free = sum(f for name, f in by_domain[domain] if (name, gpus_per_node) in placement)
        score = (_whole_nodes_broken(pool, placement), free, domain)
        if best is None or score < best[0]:
            best = (score, placement)
    return None if best is None else best[1]


def _tightest_nodes(
    pool: NodePool, candidates: list[Candidate], nodes: int, gpus_per_node: int
) -> Placement | None:
    """One pod on each of the `nodes` candidates with the fewest free GPUs (ties: whole nodes
    last, then name order)."""
    if len(candidates) < nodes:
        return None
    ranked = sorted(candidates, key=lambda c: (c[1], pool.free[c[0]] == pool.total[c[0]], c[0]))
    return tuple(sorted((name, gpus_per_node) for name, _ in ranked[:nodes]))


def _whole_nodes_broken(pool: NodePool, placement: Placement) -> int:
    return sum(
        1
        for node, gpus in placement
        if pool.free[node] == pool.total[node] and gpus < pool.total[node]
    )
