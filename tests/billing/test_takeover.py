"""Through kubesim and the real client: a controller killed mid-run and its successor count a
job's run once."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from billing.models import UsageSegment
from billing.segments import seconds_between
from cluster.models import Lease
from jobs.models import State
from tests.cluster.conftest import Cluster, cluster  # noqa: F401 (the fixture)


def test_a_controller_killed_mid_run_and_its_successor_count_the_run_once(
    cluster: Cluster,  # noqa: F811
) -> None:
    job = cluster.submit(runtime_s=20, gpus_per_node=2)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    cluster.controller.stop_leading()  # killed: the lease is not released, it expires
    Lease.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    successor = cluster.new_controller()
    cluster.drive(lambda: cluster.state(job) == State.SUCCEEDED, controller=successor)
    [segment] = UsageSegment.objects.for_team(job.team).filter(job=job)
    assert (segment.started_at, segment.ended_at) == (job.admitted_at, job.finished_at)
    assert job.admitted_at and job.finished_at
    assert segment.gpu_seconds == 2 * seconds_between(job.admitted_at, job.finished_at)
    assert (segment.attempt, segment.end_state, segment.credited) == (1, State.SUCCEEDED, False)
