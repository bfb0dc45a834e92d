"""Quota rules, queues and member caps, through the API with the roles that may change them."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from jobs.models import Job, State
from quotas.models import MemberCap, Queue, Quota
from tests.conftest import World, api_as

pytestmark = pytest.mark.django_db


def _quota(world: World, team: str, **body: object) -> tuple[int, dict[str, object]]:
    response = api_as(world.admin).post(
        "/api/v1/quotas/", {"team": team, "gpu_type": "h100-80g", **body}, format="json"
    )
    return response.status_code, response.json()


def test_admin_sets_a_quota_and_guaranteed_must_fit_the_limit(world: World) -> None:
    status, body = _quota(world, "vision", guaranteed=20, limit=10)
    assert (status, body) == (400, {"guaranteed": ["20 is above the limit of 10"]})
    status, body = _quota(world, "vision", guaranteed=8, limit=24)
    assert status == 201 and (body["guaranteed"], body["limit"]) == (8, 24)


def test_sub_team_limit_must_fit_the_department(world: World) -> None:
    status, body = _quota(world, "vision", guaranteed=8, limit=64)
    assert status == 400
    assert body == {"limit": ["64 is above department research's limit of 48 h100-80g"]}


def test_sub_teams_guarantees_must_fit_the_departments(world: World) -> None:
    status, body = _quota(world, "vision", guaranteed=20, limit=32)
    assert status == 400
    assert body == {
        "guaranteed": [
            "sub-teams of research would hold 36 guaranteed h100-80g, the department has 32"
        ]
    }


def test_a_department_cannot_shrink_below_its_sub_teams(world: World) -> None:
    status, body = _quota(world, "research", guaranteed=20, limit=48)
    assert status == 400
    assert body == {"guaranteed": ["20 is below the 32 h100-80g already guaranteed to sub-teams"]}


def test_sub_team_needs_a_department_quota_of_that_type(world: World) -> None:
    response = api_as(world.admin).post(
        "/api/v1/quotas/",
        {"team": "vision", "gpu_type": "a100-80g", "guaranteed": 1, "limit": 2},
        format="json",
    )
    assert response.json() == {"gpu_type": ["department research has no a100-80g quota to split"]}


def test_department_lead_splits_the_quota_but_a_sub_team_lead_cannot(world: World) -> None:
    from tenants.models import Membership, Role

    body = {"team": "vision", "gpu_type": "h100-80g", "guaranteed": 10, "limit": 20}
    assert api_as(world.alice).post("/api/v1/quotas/", body, format="json").status_code == 403
    Membership.objects.create(team=world.research, user=world.carol, role=Role.LEAD)
    response = api_as(world.carol).post("/api/v1/quotas/", body, format="json")
    assert response.status_code == 201
    assert Quota.objects.for_team(world.vision).get(gpu_type=world.h100).limit == 20


def test_lead_manages_queues_and_members_cannot(world: World) -> None:
    body = {
        "team": "vision",
        "name": "night",
        "priority": 10,
        "preemptible": True,
        "max_runtime": 3600,
    }
    assert api_as(world.bob).post("/api/v1/queues/", body, format="json").status_code == 403
    response = api_as(world.alice).post("/api/v1/queues/", body, format="json")
    assert response.status_code == 201
    queue_id = response.json()["id"]
    patch = api_as(world.alice).patch(
        f"/api/v1/queues/{queue_id}/", {"priority": 20}, format="json"
    )
    assert patch.json()["priority"] == 20
    bad = api_as(world.alice).patch(
        f"/api/v1/queues/{queue_id}/", {"max_runtime": 5}, format="json"
    )
    assert bad.status_code == 400 and "max_runtime" in bad.json()
    assert api_as(world.alice).delete(f"/api/v1/queues/{queue_id}/").status_code == 204
    assert not Queue.objects.for_team(world.vision).filter(name="night").exists()


@pytest.mark.parametrize("ended", [False, True], ids=["waiting", "finished"])
def test_a_queue_with_jobs_cannot_be_deleted(world: World, ended: bool) -> None:
    from tests.conftest import spec

    job = api_as(world.bob).post("/api/v1/jobs/", spec(), format="json").json()
    if ended:  # a finished job keeps its queue for its history
        Job.unscoped.filter(pk=job["id"]).update(state=State.SUCCEEDED)
    response = api_as(world.alice).delete(f"/api/v1/queues/{world.vision_normal.pk}/")
    assert response.status_code == 400
    assert response.json() == {"queue": ["normal has 1 job (waiting, running or in its history)"]}
    assert Queue.objects.for_team(world.vision).filter(name="normal").exists()
    assert not AuditEvent.chain.filter(action="queue.delete").exists()


def test_a_removed_member_loses_their_cap(world: World) -> None:
    MemberCap.objects.create(team=world.vision, user=world.bob, max_gpus=4)
    MemberCap.objects.create(team=world.nlp, user=world.bob, max_gpus=2)
    assert api_as(world.alice).delete("/api/v1/teams/vision/members/bob/").status_code == 204
    assert not MemberCap.objects.for_team(world.vision).filter(user=world.bob).exists()
    assert MemberCap.objects.for_team(world.nlp).get(user=world.bob).max_gpus == 2  # not nlp's


def test_lead_sets_a_member_cap(world: World) -> None:
    url = "/api/v1/teams/vision/members/bob/"
    assert api_as(world.bob).patch(url, {"max_gpus": 64}, format="json").status_code == 403
    response = api_as(world.alice).patch(url, {"max_gpus": 4}, format="json")
    assert response.status_code == 200 and response.json()["max_gpus"] == 4
    assert MemberCap.objects.for_team(world.vision).get(user=world.bob).max_gpus == 4
    cleared = api_as(world.alice).patch(url, {"max_gpus": None}, format="json")
    assert cleared.json()["max_gpus"] is None


def test_gpu_types_are_read_by_all_and_changed_by_admins(world: World) -> None:
    body = {
        "name": "l40s",
        "product_label": "NVIDIA-L40S",
        "memory_gb": 48,
        "gpus_per_node": 8,
        "price_per_gpu_hour": "0.9",
    }
    assert api_as(world.bob).post("/api/v1/gpu-types/", body, format="json").status_code == 403
    assert api_as(world.admin).post("/api/v1/gpu-types/", body, format="json").status_code == 201
    names = [g["name"] for g in api_as(world.carol).get("/api/v1/gpu-types/").json()["results"]]
    assert names == ["a100-80g", "h100-80g", "l40s"]
