"""/metrics: Prometheus' text format, for the holder of METRICS_TOKEN only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from cluster.lease import NAME as LEASE_NAME
from cluster.models import Gpu, Lease
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from monitoring import hot
from tests.conftest import World, spec
from tests.monitoring.conftest import NODE, Rig

pytestmark = pytest.mark.django_db
TOKEN = "scrape-token-0123456789"


@pytest.fixture(autouse=True)
def metrics_token(settings: Any) -> None:
    settings.METRICS_TOKEN = TOKEN


def _scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of one scrape."""
    response = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert response["Content-Type"] == CONTENT_TYPE_LATEST  # the text format
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_without_the_token_there_is_nothing(settings: Any, world: World) -> None:
    assert Client().get("/metrics").status_code == 401
    wrong = Client().get("/metrics", headers={"Authorization": "Bearer guess"})
    assert wrong.status_code == 401
    signed_in = Client()
    signed_in.force_login(world.admin)  # a session is not the token
    assert signed_in.get("/metrics").status_code == 401
    settings.METRICS_TOKEN = ""
    assert Client().get("/metrics", headers={"Authorization": "Bearer "}).status_code == 404


def test_jobs_by_state_team_and_gpu_type_and_the_gpus_they_hold(rig: Rig, world: World) -> None:
    queued = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    submit_job(world.nlp, parse_spec(spec(team="nlp")), acting_user=world.carol)
    ended = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    Job.unscoped.filter(pk=ended.pk).update(state=State.SUCCEEDED)
    figures = _scrape()
    labels = (("gpu_type", "h100-80g"), ("state", "QUEUED"), ("team", "vision"))
    assert figures[("gpuportal_jobs", labels)] == 1  # `queued`: rig's job runs
    assert figures[("gpuportal_jobs", (*labels[:2], ("team", "nlp")))] == 1
    running = (("gpu_type", "h100-80g"), ("state", "RUNNING"), ("team", "vision"))
    assert figures[("gpuportal_jobs", running)] == 1
    succeeded = (("gpu_type", "h100-80g"), ("state", "SUCCEEDED"), ("team", "vision"))
    assert figures[("gpuportal_jobs_ended_total", succeeded)] == 1
    assert figures[("gpuportal_gpus_held", (("gpu_type", "h100-80g"), ("team", "vision")))] == 4
    assert queued.state == State.QUEUED


def test_the_wait_histogram_counts_admitted_jobs_by_their_wait(world: World) -> None:
    now = timezone.now()
    for wait_s in (10, 100):
        job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
        Job.unscoped.filter(pk=job.pk).update(
            submitted_at=now - timedelta(seconds=wait_s), admitted_at=now
        )
    submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)  # still waiting
    figures = _scrape()

    def bucket(le: str) -> float:
        return figures[("gpuportal_job_wait_seconds_bucket", (("le", le),))]

    assert (bucket("5.0"), bucket("15.0"), bucket("60.0"), bucket("120.0")) == (0, 1, 1, 2)
    assert bucket("+Inf") == figures[("gpuportal_job_wait_seconds_count", ())] == 2
    assert figures[("gpuportal_job_wait_seconds_sum", ())] == pytest.approx(110)


def test_the_latest_gpu_samples_carry_node_gpu_team_and_job(rig: Rig) -> None:
    hot.store(
        {
            rig.node.pk: {
                0: {"DCGM_FI_DEV_GPU_UTIL": 87.0, "pod": "x"},
                7: {"DCGM_FI_DEV_GPU_TEMP": 41},
            }
        }
    )
    Gpu.objects.create(node=rig.node, index=7, healthy=False)
    figures = _scrape()
    busy = (("gpu", "0"), ("job", str(rig.job.pk)), ("node", NODE), ("team", "vision"))
    assert figures[("DCGM_FI_DEV_GPU_UTIL", busy)] == 87.0
    idle = (("gpu", "7"), ("job", ""), ("node", NODE), ("team", ""))  # beyond the job's 4
    assert figures[("DCGM_FI_DEV_GPU_TEMP", idle)] == 41
    assert figures[("gpuportal_gpus_unhealthy", (("node", NODE),))] == 1
    assert figures[("gpuportal_nodes", (("condition", "ready"), ("gpu_type", "h100-80g")))] == 1


def test_the_controller_lease_says_whether_the_queue_moves(world: World) -> None:
    assert not any(name == "gpuportal_controller_lease_seconds" for name, _ in _scrape())
    now = timezone.now()
    Lease.objects.create(
        name=LEASE_NAME, holder="c-1", expires_at=now + timedelta(seconds=30), acquired_at=now
    )
    assert 0 < _scrape()[("gpuportal_controller_lease_seconds", ())] <= 30
