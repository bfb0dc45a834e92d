"""`gpuctl usage` (GPU-hours and cost from the usage API) and `gpuctl top` (a job's GPUs now)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import httpx
import pytest
from django.db import transaction

from cli.errors import INVALID, NOT_FOUND
from cluster.models import Node
from jobs.actions import submit_job
from jobs.spec import parse_spec
from monitoring.endpoint import PATH
from monitoring.tokens import rotate_node_token
from tests.billing.conftest import FakeClock, ran
from tests.cli.conftest import Live
from tests.conftest import spec
from tests.monitoring.conftest import NODE, batch, gpu_sample, run_on

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    from django.utils import timezone

    fake = FakeClock()
    monkeypatch.setattr(timezone, "now", fake)
    return fake


def _at(day: int, hour: int) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def test_usage_shows_gpu_hours_and_cost_with_the_total(live: Live, clock: FakeClock) -> None:
    world = live.world
    with transaction.atomic():  # as the controller moves jobs: audit events need one
        ran(world.vision, world.bob, clock, _at(3, 10), _at(3, 12), gpus=2)
        ran(world.vision, world.alice, clock, _at(4, 10), _at(4, 11))
        ran(world.nlp, world.carol, clock, _at(5, 10), _at(5, 20))
    clock.set(_at(20, 12))

    shown = live.run("usage", "--month", "2026-11", "--by", "user", user=world.alice)
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == "Usage from 2026-11-01 to 2026-11-30"
    assert lines[2].split()[:3] == ["USER", "GPU", "HOURS"]
    by_user = {line.split()[0]: line.split()[1] for line in lines[3:6]}
    assert by_user == {"alice": "1.0000", "bob": "4.0000", "TOTAL": "5.0000"}
    assert "carol" not in shown.output and "nlp" not in shown.output

    answer = live.run("usage", "--month", "2026-11", "--by", "day", "-o", "json", user=world.bob)
    assert answer.exit_code == 0, answer.output
    body = json.loads(answer.output)
    assert body["group_by"] == ["day"]
    assert [(r["day"], r["gpu_hours"]) for r in body["rows"]] == [("2026-11-03", "4.0000")]
    assert [(t["team"], t["gpu_hours"]) for t in body["team_totals"]] == [("vision", "5.0000")]


def test_usage_refuses_a_bad_month_naming_it(live: Live) -> None:
    result = live.run("usage", "--month", "2026-13", user=live.world.bob)
    assert result.exit_code == INVALID
    assert "period: must be a month, YYYY-MM" in result.output


def test_top_once_prints_each_gpus_newest_figures(live: Live) -> None:
    world = live.world
    node = Node.objects.create(name=NODE, gpu_type=world.h100, gpu_capacity=8, ready=True)
    token = rotate_node_token(node)
    job = submit_job(world.vision, parse_spec(spec(gpus_per_node=2)), acting_user=world.bob)
    run_on(job, {NODE: 2})
    now = time.time()
    samples = [gpu_sample(i, now, DCGM_FI_DEV_FB_USED=20480.0 * (i + 1)) for i in range(4)]
    posted = httpx.post(
        live.url + PATH, json=batch(samples), headers={"Authorization": f"Bearer {token}"}
    )
    assert posted.is_success, posted.text

    result = live.run("top", str(job.pk), "--once", user=world.alice)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"job {job.pk}: RUNNING"
    assert lines[2].split()[:4] == ["NODE", "GPU", "UTIL", "MEMORY"]
    rows = [line.split()[:6] for line in lines[3:]]
    assert rows == [  # only the job's two GPUs
        [NODE, "0", "50%", "20.0/79.6", "40", "300"],
        [NODE, "1", "51%", "40.0/79.6", "41", "300"],
    ]

    outsider = live.run("top", str(job.pk), "--once", user=world.carol)
    assert outsider.exit_code == NOT_FOUND
    assert "20.0/79.6" not in outsider.output
