"""The store's invariants under the controllers, driven in-process on a manual clock.

Controllers change objects through `thaw()`, sharing what they leave alone with the stored
version, and quota reads usage kept incrementally: both are checked against the slow truth.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import pytest

from kubesim import ManualClock, default_cluster
from kubesim.quota import Usage, object_usage
from kubesim.resources import JOB, NAMESPACE, POD, QUOTA
from kubesim.sim import Simulation
from kubesim.store import Stored, dumps
from tests.kubesim.conftest import job_manifest, pod_manifest


@pytest.fixture
def cluster() -> Iterator[tuple[Simulation, ManualClock]]:
    clock = ManualClock()
    sim = Simulation(default_cluster(), clock)
    sim.api.create(NAMESPACE, "", {"metadata": {"name": "lab"}})
    quota = {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "64"}}}
    sim.api.create(QUOTA, "lab", quota)
    yield sim, clock


def _run(sim: Simulation, clock: ManualClock, seconds: float) -> None:
    for _ in range(int(seconds / 0.5)):
        sim.tick()
        clock.advance(0.5)
    sim.tick()


def _lifecycle(sim: Simulation, clock: ManualClock) -> None:
    """Jobs that complete, fail and get deleted; a pod on a node that goes NotReady and back."""
    indexed = job_manifest("idx", runtime=2, completionMode="Indexed", completions=2, parallelism=2)
    sim.api.create(JOB, "lab", indexed)
    sim.api.create(JOB, "lab", job_manifest("boom", runtime=1, exit_code=3, backoffLimit=0))
    sim.api.create(JOB, "lab", job_manifest("long", runtime=600, ttlSecondsAfterFinished=1))
    sim.api.create(POD, "lab", pod_manifest("web", gpus=1))
    _run(sim, clock, 6)
    node = sim.api.get(POD, "lab", "web").obj["spec"]["nodeName"]
    sim.lifecycle.set_not_ready(node)
    _run(sim, clock, 3)
    sim.lifecycle.set_ready(node)
    sim.api.delete(JOB, "lab", "long", {"propagationPolicy": "Foreground"})
    _run(sim, clock, 6)


def test_committed_versions_never_change_afterwards(
    cluster: tuple[Simulation, ManualClock],
) -> None:
    sim, clock = cluster
    published: list[tuple[Stored, bytes, bytes]] = []
    sim.store.listeners.append(
        lambda r, t, new, old: published.append((new, new.raw, dumps(new.obj)))
    )
    _lifecycle(sim, clock)
    reasons = {s.obj.get("reason") for s, _, _ in published}
    assert {"Completed", "BackoffLimitExceeded", "NodeNotReady", "Killing"} <= reasons
    misencoded = [s.obj["metadata"]["name"] for s, raw, full in published if raw != full]
    changed = [s.obj["metadata"]["name"] for s, _, full in published if dumps(s.obj) != full]
    assert misencoded == [] and changed == []


def _recount(sim: Simulation, namespace: str) -> Usage:
    total: Usage = defaultdict(float)
    for resource in (POD, JOB):
        for stored in sim.store.items(resource.key, namespace):
            for name, value in object_usage(resource, stored.obj).items():
                total[name] += value
    return {name: value for name, value in total.items() if value}


def test_namespace_usage_matches_a_full_recount(cluster: tuple[Simulation, ManualClock]) -> None:
    sim, clock = cluster
    _lifecycle(sim, clock)
    running = _recount(sim, "lab")
    assert running["requests.nvidia.com/gpu"] == 1  # "web" still runs; the jobs are done
    kept = {name: value for name, value in sim.api.usage.of("lab").items() if value}
    assert kept == running
    status = sim.api.get(QUOTA, "lab", "gpus").obj["status"]
    assert status["used"] == {"requests.nvidia.com/gpu": "1"}
