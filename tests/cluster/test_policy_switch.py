"""Admins switch the scheduling policy in the portal: audited, and the controller's next cycle
decides under it without a restart."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent
from cluster import scheduling
from cluster.dry_run import policy_config
from cluster.models import SchedulingPolicy
from cluster.policy import effective
from scheduler import Policy, PolicyConfig
from tests.cluster.conftest import Cluster
from tests.conftest import World


def _signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_an_admin_switches_the_policy_and_it_is_audited(world: World) -> None:
    page = reverse("manage-scheduling")
    admin = _signed_in(world.admin)
    assert "fair" in admin.get(page).content.decode()  # the setting's, until someone chooses
    response = admin.post(page, {"policy": "fifo"})
    assert response.status_code == 302
    assert SchedulingPolicy.objects.get().policy == "fifo"
    event = AuditEvent.chain.get(action="scheduler.policy")
    assert (event.actor_name, event.before, event.after) == (
        "admin",
        {"policy": None},
        {"policy": "fifo"},
    )
    assert policy_config().policy == Policy.FIFO  # the dry run answers under it too
    admin.post(page, {"policy": "capacity"})
    latest = AuditEvent.chain.filter(action="scheduler.policy").order_by("-seq").first()
    assert latest is not None and latest.before == {"policy": "fifo"}


@pytest.mark.django_db
def test_an_unknown_policy_is_refused_and_changes_nothing(world: World) -> None:
    response = _signed_in(world.admin).post(
        reverse("manage-scheduling"), {"policy": "lottery"}, follow=True
    )
    assert "must be one of fifo, fair, capacity" in response.content.decode()
    assert not SchedulingPolicy.objects.exists()
    assert not AuditEvent.chain.filter(action="scheduler.policy").exists()


@pytest.mark.django_db
def test_a_team_lead_may_not_switch_it(world: World) -> None:
    response = _signed_in(world.alice).post(reverse("manage-scheduling"), {"policy": "fifo"})
    assert response.status_code == 403
    assert not SchedulingPolicy.objects.exists()


@pytest.mark.django_db
def test_without_a_choice_the_controllers_own_policy_holds() -> None:
    config = PolicyConfig(policy=Policy.CAPACITY)
    assert effective(config) is config


def test_the_controllers_next_cycle_decides_under_the_new_policy(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Policy] = []
    real = scheduling.decide

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[2].policy)
        return real(*args, **kwargs)

    monkeypatch.setattr(scheduling, "decide", recording)
    cluster.submit(runtime_s=5000)
    cluster.drive(lambda: bool(seen))
    assert seen[-1] == Policy.FAIR  # the fixture's controller runs the default
    _signed_in(cluster.world.admin).post(reverse("manage-scheduling"), {"policy": "fifo"})
    cluster.controller.scheduling.want()
    before = len(seen)
    cluster.drive(lambda: len(seen) > before)
    assert seen[-1] == Policy.FIFO
