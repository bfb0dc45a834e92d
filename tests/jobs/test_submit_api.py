"""Submitting, listing, cancelling and cloning jobs through the API."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from base.rest import Pagination
from jobs.models import Job, State
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db


def test_member_submits_a_job_and_it_is_queued(world: World) -> None:
    response = api_as(world.bob).post("/api/v1/jobs/", spec(), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "QUEUED"
    assert body["owner"] == "bob"
    assert body["team"] == "vision"
    assert body["queue"] == "normal"
    assert body["max_runtime"] == 86400
    job = Job.objects.for_team(world.vision).get(pk=body["id"])
    assert [e.to_state for e in job.events.all()] == [State.QUEUED]


def test_submission_writes_exactly_one_audit_event(world: World) -> None:
    before = AuditEvent.objects.for_user(world.admin).count()
    api_as(world.bob).post("/api/v1/jobs/", spec(), format="json")
    events = AuditEvent.objects.for_user(world.admin)
    assert events.count() == before + 1
    assert events.first().action == "job.submit"  # type: ignore[union-attr]


def test_it_masks_secret_looking_env_values(world: World) -> None:
    body = spec(env={"WANDB_API_KEY": "abc123", "EPOCHS": "3"})
    response = api_as(world.bob).post("/api/v1/jobs/", body, format="json")
    assert response.json()["env"] == {"WANDB_API_KEY": "********", "EPOCHS": "3"}
    audit = AuditEvent.objects.for_user(world.admin).first()
    assert audit is not None and "abc123" not in str(audit.after)


def test_owner_cancels_a_queued_job(world: World) -> None:
    job_id = api_as(world.bob).post("/api/v1/jobs/", spec(), format="json").json()["id"]
    response = api_as(world.bob).post(f"/api/v1/jobs/{job_id}/cancel/")
    assert response.status_code == 200
    assert response.json()["state"] == "CANCELLED"
    again = api_as(world.bob).post(f"/api/v1/jobs/{job_id}/cancel/")
    assert again.status_code == 400
    assert again.json() == {"state": [f"job {job_id} has already ended (CANCELLED)"]}


def test_teammate_cannot_cancel_someone_elses_job_but_lead_can(world: World) -> None:
    job_id = api_as(world.bob).post("/api/v1/jobs/", spec(), format="json").json()["id"]
    assert api_as(world.alice).get(f"/api/v1/jobs/{job_id}/").status_code == 200
    world.alice.memberships.update(role="member")
    assert api_as(world.alice).post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 403
    world.alice.memberships.update(role="lead")
    assert api_as(world.alice).post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 200


def test_clone_submits_a_copy_linked_to_the_original(world: World) -> None:
    job_id = (
        api_as(world.bob)
        .post("/api/v1/jobs/", spec(nodes=2, gpus_per_node=8), format="json")
        .json()["id"]
    )
    response = api_as(world.bob).post(
        f"/api/v1/jobs/{job_id}/clone/", {"name": "again"}, format="json"
    )
    assert response.status_code == 201
    clone = response.json()
    assert (clone["name"], clone["nodes"], clone["gpus_per_node"]) == ("again", 2, 8)
    assert clone["cloned_from"] == job_id
    assert clone["state"] == "QUEUED"


def test_list_filters_by_state_and_rejects_unknown_states(world: World) -> None:
    client = api_as(world.bob)
    first = client.post("/api/v1/jobs/", spec(), format="json").json()["id"]
    client.post("/api/v1/jobs/", spec(name="second"), format="json")
    client.post(f"/api/v1/jobs/{first}/cancel/")
    queued = client.get("/api/v1/jobs/?state=QUEUED").json()
    assert [j["name"] for j in queued["results"]] == ["second"]
    bad = client.get("/api/v1/jobs/?state=BOGUS")
    assert bad.status_code == 400
    assert bad.json() == {"state": ["unknown state(s): BOGUS"]}


def test_job_list_query_count_does_not_grow_with_jobs(
    world: World, django_assert_max_num_queries: object
) -> None:
    client = api_as(world.bob)
    for index in range(30):
        client.post("/api/v1/jobs/", spec(name=f"job-{index}"), format="json")
    with django_assert_max_num_queries(4):  # type: ignore[operator]
        response = client.get("/api/v1/jobs/")
    assert response.json()["count"] == 30


def test_job_list_shows_a_summary_and_the_job_its_whole_spec(world: World) -> None:
    client = api_as(world.bob)
    body = spec(env={"BLOB": "x" * 30_000}, args=["--epochs", "3"])
    job_id = client.post("/api/v1/jobs/", body, format="json").json()["id"]
    listed = api_as(world.alice).get("/api/v1/jobs/")
    assert len(listed.content) < 2_000
    row = listed.json()["results"][0]
    assert not {"command", "args", "env"} & set(row)
    assert (row["id"], row["name"], row["image"], row["state"]) == (
        job_id,
        "train-resnet",
        "registry.example/vision/train:1.0",
        "QUEUED",
    )
    whole = api_as(world.alice).get(f"/api/v1/jobs/{job_id}/").json()
    assert whole["env"] == {"BLOB": "x" * 30_000}
    assert (whole["command"], whole["args"]) == (["python", "train.py"], ["--epochs", "3"])


def test_page_size_is_capped(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Pagination, "max_page_size", 2)
    client = api_as(world.bob)
    for index in range(3):
        client.post("/api/v1/jobs/", spec(name=f"job-{index}"), format="json")
    page = client.get("/api/v1/jobs/?page_size=1000").json()
    assert (page["count"], len(page["results"])) == (3, 2)
