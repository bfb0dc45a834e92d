"""The pages a person uses: submit with the form or a pasted spec, follow, cancel, manage."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.models import AuditEvent
from jobs.models import Job, State
from quotas.models import GpuType, Queue, Quota
from tests.conftest import PASSWORD, World

pytestmark = pytest.mark.django_db


def _as(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


FORM = {
    "team": "vision",
    "name": "form-job",
    "image": "registry.example/vision/train:1.0",
    "command": "python train.py --lr 3e-4",
    "gpu_type": "h100-80g",
    "gpus_per_node": "2",
    "nodes": "1",
    "memory": "64Gi",
    "env": "EPOCHS=3\nWANDB_API_KEY=abc",
}


def test_login_page_logs_in_and_audits_it(world: World) -> None:
    client = Client()
    response = client.post("/accounts/login/", {"username": "bob", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"
    assert AuditEvent.objects.for_user(world.admin).first().action == "auth.login"  # type: ignore[union-attr]
    assert b"Dashboard" in client.get("/").content


def test_member_submits_with_the_form_fields(world: World) -> None:
    response = _as(world.bob).post("/jobs/new/", FORM)
    job = Job.objects.for_team(world.vision).get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.command == ["python", "train.py", "--lr", "3e-4"]
    assert (job.gpus_per_node, job.memory, job.env["EPOCHS"]) == (2, "64Gi", "3")
    page = _as(world.bob).get(f"/jobs/{job.pk}/").content.decode()
    assert "form-job" in page and "********" in page and "abc" not in page.split("WANDB")[1][:60]


def test_member_submits_a_pasted_yaml_spec(world: World) -> None:
    yaml_spec = (
        "name: pasted\nimage: python:3.11\ncommand: [python, -c, 'print(1)']\n"
        "gpu_type: h100-80g\ngpus_per_node: 8\nnodes: 2\nqueue: high\n"
    )
    _as(world.bob).post("/jobs/new/", {"team": "vision", "spec_yaml": yaml_spec})
    job = Job.objects.for_team(world.vision).get()
    assert (job.name, job.nodes, job.gpus_per_node, job.queue.name) == ("pasted", 2, 8, "high")


def test_form_shows_the_reason_for_a_refused_job(world: World) -> None:
    response = _as(world.bob).post("/jobs/new/", {**FORM, "gpus_per_node": "16"})
    assert response.status_code == 400
    page = response.content.decode()  # the error beside its field, under the field's label
    assert 'id="id_gpus_per_node_error"' in page
    assert "16 requested, nodes of type h100-80g have 8" in page
    bad_yaml = _as(world.bob).post("/jobs/new/", {"team": "vision", "spec_yaml": "name: [oops"})
    assert "spec: is not valid YAML at line 1" in bad_yaml.content.decode()
    assert not Job.objects.for_team(world.vision).exists()


def test_owner_cancels_and_clones_from_the_job_page(world: World) -> None:
    client = _as(world.bob)
    client.post("/jobs/new/", FORM)
    job = Job.objects.for_team(world.vision).get()
    client.post(f"/jobs/{job.pk}/clone/")
    client.post(f"/jobs/{job.pk}/cancel/")
    job.refresh_from_db()
    assert job.state == State.CANCELLED
    clone = Job.objects.for_team(world.vision).exclude(pk=job.pk).get()
    assert clone.cloned_from_id == job.pk and clone.state == State.QUEUED


def test_lead_edits_members_and_queues_on_the_team_page(world: World) -> None:
    lead = _as(world.alice)
    page = lead.get("/teams/vision/").content.decode()
    assert "Add member" in page and "Add queue" in page
    lead.post("/teams/vision/members/", {"username": "carol", "role": "member"})
    lead.post("/teams/vision/members/carol/", {"role": "member", "max_gpus": "4"})
    lead.post(
        "/teams/vision/queues/",
        {"name": "night", "priority": "5", "max_runtime": "3600", "preemptible": "on"},
    )
    assert Queue.objects.for_team(world.vision).get(name="night").preemptible is True
    assert "carol" in lead.get("/teams/vision/").content.decode()
    refused = lead.post(
        "/teams/vision/queues/",
        {"name": "x", "priority": "high", "max_runtime": "3600"},
        follow=True,
    )
    assert "priority: must be a whole number, got &#x27;high&#x27;" in refused.content.decode()
    member_view = _as(world.bob).get("/teams/vision/").content.decode()
    assert "Add member" not in member_view


def test_department_lead_splits_quota_on_the_department_page(world: World) -> None:
    from tenants.models import Membership, Role

    Membership.objects.create(team=world.research, user=world.carol, role=Role.LEAD)
    lead = _as(world.carol)
    department = lead.get("/teams/research/").content.decode()
    assert "Sub-teams" in department and 'href="/manage/whatif/"' in department
    lead.post(
        "/teams/research/quotas/",
        {"team": "vision", "gpu_type": "h100-80g", "guaranteed": "12", "limit": "24"},
    )
    quota = Quota.objects.for_team(world.vision).get(gpu_type=world.h100)
    assert (quota.guaranteed, quota.limit) == (12, 24)


def test_admin_pages_create_teams_gpu_types_and_quotas(world: World) -> None:
    admin = _as(world.admin)
    admin.post("/manage/teams/", {"slug": "audio", "name": "Audio", "parent": "research"})
    admin.post(
        "/manage/gpu-types/",
        {
            "name": "l40s",
            "product_label": "NVIDIA-L40S",
            "memory_gb": "48",
            "gpus_per_node": "8",
            "price_per_gpu_hour": "0.9",
        },
    )
    admin.post(
        "/manage/quotas/",
        {"team": "vision", "gpu_type": "h100-80g", "guaranteed": "4", "limit": "8"},
    )
    assert GpuType.objects.filter(name="l40s").exists()
    assert Quota.objects.for_team(world.vision).get(gpu_type=world.h100).limit == 8
    assert "audio" in admin.get("/manage/teams/").content.decode()


def test_audit_page_filters_and_exports_csv(world: World) -> None:
    _as(world.bob).post("/jobs/new/", FORM)
    lead = _as(world.alice)
    page = lead.get("/audit/?action=job.").content.decode()
    assert "job.submit" in page
    export = lead.get("/audit/export.csv?action=job.")
    rows = b"".join(export.streaming_content).decode().strip().splitlines()  # type: ignore[attr-defined]
    assert rows[0].startswith("seq,at,actor_name,team_slug,action")
    assert len(rows) == 2 and ",bob,vision,job.submit," in rows[1]
    bad = lead.get("/audit/?since=yesterday")
    assert bad.status_code == 400 and 'id="audit-since-error"' in bad.content.decode()
    _as(world.alice).post("/jobs/new/", {**FORM, "name": "alices-own"})
    # A member sees the events about his own jobs, not his teammates'.
    mine = _as(world.bob).get("/audit/").content.decode()
    assert "job.submit" in mine and "alices-own" not in mine


@pytest.mark.parametrize(
    ("url", "most"),
    [
        ("/", 13),
        ("/jobs/", 13),
        ("/audit/", 13),
        # Also the team's budget and its fair-share standing: the scheduler's snapshot of
        # holdings, nodes, teams, quotas and caps (cluster/shares.py), a fixed nine.
        ("/teams/vision/", 24),
    ],
)
def test_list_pages_query_count_does_not_grow(
    world: World, url: str, most: int, django_assert_max_num_queries: object
) -> None:
    client = _as(world.alice)
    for index in range(25):
        client.post("/jobs/new/", {**FORM, "name": f"job-{index}"})
    # One of them the header's count of unread notifications.
    with django_assert_max_num_queries(most):  # type: ignore[operator]
        assert client.get(url).status_code == 200
