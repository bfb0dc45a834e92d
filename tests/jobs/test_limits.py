"""Canary of `jobs.limits`: its one hand-written statement reads what the ORM would."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.limits import read_limits
from quotas.models import MemberCap, Queue, Quota
from tenants.models import Membership, Team
from tests.conftest import World

pytestmark = pytest.mark.django_db


def test_it_reads_what_the_orm_reads(world: World, django_assert_num_queries: Any) -> None:
    MemberCap.objects.create(team=world.vision, user=world.bob, max_gpus=4)
    with django_assert_num_queries(1):
        limits = read_limits(world.vision, world.bob, "h100-80g")
    assert limits is not None
    assert (
        limits.member == Membership.objects.for_team(world.vision).filter(user=world.bob).exists()
    )
    assert limits.cap == 4
    assert limits.limit == Quota.objects.for_team(world.vision).get(gpu_type=world.h100).limit
    assert limits.gpu_type is not None
    assert (limits.gpu_type.pk, limits.gpu_type.name, limits.gpu_type.gpus_per_node) == (
        world.h100.pk,
        "h100-80g",
        8,
    )
    expected = {
        q.name: (q.pk, q.priority, q.preemptible, q.max_runtime)
        for q in Queue.objects.for_team(world.vision)
    }
    assert {
        name: (q.pk, q.priority, q.preemptible, q.max_runtime) for name, q in limits.queues.items()
    } == expected
    assert all(q.team == world.vision for q in limits.queues.values())


def test_what_is_missing_reads_as_missing(world: World) -> None:
    outsider = read_limits(world.vision, world.carol, "a100-80g")  # no quota of a100
    assert outsider is not None
    assert (outsider.member, outsider.cap, outsider.limit) == (False, None, None)
    assert outsider.gpu_type is not None and outsider.gpu_type.name == "a100-80g"
    unknown = read_limits(world.vision, world.bob, "no-such-gpu")
    assert unknown is not None and unknown.gpu_type is None and unknown.limit is None
    bare = Team.objects.create(slug="bare", name="Bare")
    alone = read_limits(bare, world.bob, "h100-80g")
    assert alone is not None and alone.queues == {}


def test_a_team_gone_reads_as_none(world: World) -> None:
    gone = Team.objects.create(slug="gone", name="Gone")
    gone_id = gone.pk
    gone.delete()
    gone.pk = gone_id
    assert read_limits(gone, world.bob, "h100-80g") is None
