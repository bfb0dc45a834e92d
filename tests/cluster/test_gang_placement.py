"""A multi-pod job's pods all run at once, each on its own placed node, through kubesim."""

from __future__ import annotations

import pytest

from cluster.backend import Obj
from cluster.manifests import LABEL_JOB
from cluster.models import Node
from jobs.models import Job, State
from tests.cluster.conftest import Cluster

pytestmark = pytest.mark.django_db(transaction=True)


def _pods(cluster: Cluster, job: Job) -> list[Obj]:
    return cluster.backend.list("pods", f"{LABEL_JOB}={job.pk}").items


def _all_running(cluster: Cluster, job: Job) -> bool:
    """Every pod of the job Running in the cluster, and the portal saying so."""
    pods = _pods(cluster, job)
    together = len(pods) == job.nodes and all(p["status"].get("phase") == "Running" for p in pods)
    return together and cluster.state(job) == State.RUNNING


@pytest.mark.parametrize(("nodes", "gpus"), [(2, 2), (2, 8), (4, 1), (4, 8)])
def test_every_pod_of_a_gang_runs_at_the_same_time(cluster: Cluster, nodes: int, gpus: int) -> None:
    job = cluster.submit(runtime_s=3600, nodes=nodes, gpus_per_node=gpus)
    cluster.drive(lambda: _all_running(cluster, job))
    assert job.placement == {node: gpus for node in job.placement} and len(job.placement) == nodes
    bound = sorted(p["spec"]["nodeName"] for p in _pods(cluster, job))
    assert bound == sorted(job.placement)  # one pod on each placed node, as placed


def test_gangs_of_every_shape_run_side_by_side_on_a_partly_used_cluster(cluster: Cluster) -> None:
    cluster.drive(lambda: Node.objects.count() == 12)
    # Leave one H100 node with 4 free GPUs: it could hold all of a 2 x 2 job, which must not go
    # there whole (its second pod would wait for the first to end).
    busy = [cluster.submit(runtime_s=3600, gpus_per_node=8) for _ in range(2)]
    busy.append(cluster.submit(runtime_s=3600, gpus_per_node=4))
    cluster.drive(lambda: all(cluster.state(j) == State.RUNNING for j in busy))
    gangs = [
        cluster.submit(runtime_s=3600, nodes=2, gpus_per_node=2),
        cluster.submit(runtime_s=3600, nodes=4, gpus_per_node=1),
    ]
    cluster.drive(lambda: all(_all_running(cluster, j) for j in gangs))
    for job in gangs:
        assert len(job.placement) == job.nodes
