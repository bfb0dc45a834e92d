"""The job list (search, filters, sorting, paging that keeps them, bulk cancel with a confirm
page), the submit form's errors (beside their fields, all at once) and clone-then-edit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db

FORM = {
    "team": "vision",
    "name": "form-job",
    "image": "registry.example/vision/train:1.0",
    "command": "python train.py",
    "gpu_type": "h100-80g",
    "gpus_per_node": "2",
    "nodes": "1",
    "memory": "64Gi",
}


def _as(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


def _submit(world: World, name: str, user: object = None, **extra: object) -> Job:
    owner = user or world.bob
    team = world.nlp if owner == world.carol else world.vision
    body = spec(name=name, team=team.slug, **extra)
    return submit_job(team, parse_spec(body), acting_user=owner)  # type: ignore[arg-type]


def _names(html: str, *candidates: str) -> list[str]:
    """The candidates that appear, in the order they appear."""
    return sorted(
        (c for c in candidates if f">{c}</a>" in html), key=lambda c: html.index(f">{c}</a>")
    )


def test_list_searches_and_filters_by_every_field(world: World) -> None:
    _submit(world, "train-a")
    _submit(world, "eval-b", queue="high")
    _submit(world, "train-c", user=world.alice)
    client = _as(world.alice)
    cases = {
        "q=train": ["train-a", "train-c"],
        "user=bob": ["train-a", "eval-b"],
        "queue=high": ["eval-b"],
        "team=vision&gpu_type=h100-80g&state=QUEUED": ["train-a", "eval-b", "train-c"],
        "state=RUNNING": [],
        "mine=on": ["train-c"],
    }
    for query, expected in cases.items():
        page = client.get(f"/jobs/?{query}").content.decode()
        assert sorted(_names(page, "train-a", "eval-b", "train-c")) == sorted(expected), query


def test_list_filters_by_date_and_refuses_a_bad_date_naming_the_field(world: World) -> None:
    _submit(world, "today")
    today = timezone.localdate()
    client = _as(world.bob)
    assert "today" in client.get(f"/jobs/?since={today}&until={today}").content.decode()
    tomorrow = today + timedelta(days=1)
    assert ">today</a>" not in client.get(f"/jobs/?since={tomorrow}").content.decode()
    bad = client.get("/jobs/?since=2026-13-45")
    assert bad.status_code == 400
    assert 'id="id_since_error"' in bad.content.decode()


def test_columns_sort_both_ways_and_paging_keeps_the_filters(world: World) -> None:
    for name in ("b-job", "a-job", "c-job"):
        _submit(world, name)
    client = _as(world.bob)
    ascending = client.get("/jobs/?sort=name").content.decode()
    assert _names(ascending, "a-job", "b-job", "c-job") == ["a-job", "b-job", "c-job"]
    assert 'aria-sort="ascending"' in ascending and "sort=-name" in ascending
    descending = client.get("/jobs/?sort=-name").content.decode()
    assert _names(descending, "a-job", "b-job", "c-job") == ["c-job", "b-job", "a-job"]
    for index in range(51):
        _submit(world, f"many-{index}")
    page = client.get("/jobs/?q=many&sort=name").content.decode()
    assert "q=many&amp;sort=name&amp;page=2" in page


def test_bulk_cancel_asks_first_then_cancels_only_what_the_user_may(world: World) -> None:
    mine, alices, foreign = (
        _submit(world, "mine"),
        _submit(world, "alices", user=world.alice),
        _submit(world, "foreign", user=world.carol),
    )
    bob = _as(world.bob)
    ids = [mine.pk, alices.pk, foreign.pk]
    confirm = bob.get("/jobs/cancel/", {"job": ids})
    page = confirm.content.decode()
    assert confirm.status_code == 200 and "mine" in page
    assert "alices" not in page and "foreign" not in page
    assert Job.objects.for_user(world.admin).filter(state=State.CANCELLED).count() == 0
    bob.post("/jobs/cancel/", {"job": ids})
    states = dict(Job.objects.for_user(world.admin).values_list("name", "state"))
    assert states == {"mine": "CANCELLED", "alices": "QUEUED", "foreign": "QUEUED"}


def test_form_reports_every_problem_beside_its_field_at_once(world: World) -> None:
    response = _as(world.bob).post(
        "/jobs/new/", {**FORM, "gpus_per_node": "16", "queue": "nope", "name": "x" * 300}
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert (
        'id="id_gpus_per_node_error"' in page
        and "16 requested, nodes of type h100-80g have 8" in page
    )
    assert "team vision has no queue &#x27;nope&#x27;" in page
    assert "at most 40 characters" in page.split('id="id_name_error"')[1][:400]
    assert "gpus_per_node:" not in page  # the label, not the raw field name
    assert not Job.objects.for_user(world.admin).exists()


def test_zero_gpus_per_node_is_an_error_not_one_gpu(world: World) -> None:
    response = _as(world.bob).post("/jobs/new/", {**FORM, "gpus_per_node": "0"})
    assert response.status_code == 400
    assert "must be between 1 and 64, got 0" in response.content.decode()
    assert not Job.objects.for_user(world.admin).exists()


def test_clone_opens_the_form_prefilled_and_submits_the_edit(world: World) -> None:
    source = _submit(world, "original", env={"EPOCHS": "3", "WANDB_API_KEY": "sekrit-123"})
    client = _as(world.bob)
    form = client.get(f"/jobs/new/?clone={source.pk}").content.decode()
    assert 'value="original"' in form and "EPOCHS=3" in form
    assert "sekrit-123" not in form and "WANDB_API_KEY=********" in form
    data = {**FORM, "name": "edited", "clone": str(source.pk)}
    data["env"] = "EPOCHS=5\nWANDB_API_KEY=********"
    response = client.post("/jobs/new/", data)
    clone = Job.objects.for_user(world.bob).get(name="edited")
    assert response.status_code == 302
    assert clone.cloned_from_id == source.pk
    assert clone.env == {"EPOCHS": "5", "WANDB_API_KEY": "sekrit-123"}


def test_outsider_cannot_clone_a_foreign_job_into_the_form(world: World) -> None:
    source = _submit(world, "secret-vision")
    assert _as(world.carol).get(f"/jobs/new/?clone={source.pk}").status_code == 404
