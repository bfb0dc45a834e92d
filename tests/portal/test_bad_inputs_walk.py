"""The bad inputs of issue 23's walk, fed to every page: each answers (a 4xx where it refuses),
never a 500, and nothing is written."""

from __future__ import annotations

import pytest
from django.test import Client

from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db

LONG = "x" * 300
BAD_DATES = ["2026-13-45", "yesterday", "0000-00-00", "2026-02-30T25:61", "%00", LONG]
FORMS = [
    {"gpus_per_node": "0"},
    {"gpus_per_node": "16", "queue": "nope"},
    {"gpus_per_node": "-1", "nodes": "abc"},
    {"name": LONG},
    {"command": "python 'unbalanced"},
    {"cpu": "NaN", "memory": "lots"},
    {"max_runtime": "99999999999999999999999"},
    {"spec_yaml": "name: [oops"},
    {"spec_yaml": "gpus_per_node: 0\nname: " + LONG},
    {"team": "nlp", "queue": "nope"},
    {"team": LONG},
    {"env": "=novalue\n1BAD=x"},
]
BASE = {
    "team": "vision",
    "name": "walk",
    "image": "registry.example/vision/train:1.0",
    "command": "python train.py",
    "gpu_type": "h100-80g",
}


def _as(user: object) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)  # type: ignore[arg-type]
    return client


def _gets(job_id: int) -> list[str]:
    urls = []
    for date in BAD_DATES:
        urls += [f"/jobs/?since={date}", f"/jobs/?until={date}", f"/audit/?since={date}"]
        urls += [f"/audit/export.csv?until={date}"]
    urls += [
        "/jobs/?sort=nonsense", "/jobs/?page=-1", "/jobs/?page=abc", f"/jobs/?q={LONG}",
        "/jobs/?state=BOGUS&team=nope&gpu_type=zzz", "/jobs/new/?clone=abc",
        "/jobs/new/?clone=999999", f"/jobs/new/?clone={job_id}", "/jobs/cancel/?job=abc&job=-1",
        "/audit/?page=abc", "/audit/?team=%00", f"/jobs/{job_id}/", "/jobs/999999/",
        "/teams/nope/", "/manage/teams/", "/manage/quotas/", "/manage/nodes/",
    ]  # fmt: skip
    return urls


@pytest.mark.parametrize("who", ["bob", "alice", "admin", "carol"])
def test_no_page_answers_500_to_the_walks_bad_inputs(world: World, who: str) -> None:
    job = submit_job(world.vision, parse_spec(spec(name="walked")), acting_user=world.bob)
    client = _as(getattr(world, who))
    for url in _gets(job.pk):
        status = client.get(url).status_code
        assert status < 500, (who, url, status)
    for form in FORMS:
        response = client.post("/jobs/new/", {**BASE, **form})
        assert response.status_code in (400, 404), (who, form, response.status_code)
    posts = [
        ("/jobs/cancel/", {"job": ["abc", "-1", "999999"]}),
        ("/teams/vision/members/alice/", {"role": "member"}),
        ("/teams/vision/members/alice/", {"remove": "1"}),
        ("/teams/vision/members/bob/", {"max_gpus": "-5"}),
        ("/teams/vision/queues/", {"name": LONG, "priority": "high", "max_runtime": "0"}),
        ("/audit/verify/", {}),
    ]
    for url, data in posts:
        status = client.post(url, data).status_code
        assert status < 500, (who, url, status)
    assert list(Job.objects.for_user(world.admin).values_list("name", flat=True)) == ["walked"]
