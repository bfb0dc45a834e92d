"""The admins' cluster page: every node's GPUs with their latest readings and health."""

from __future__ import annotations

from typing import Any

from django.test import Client

from cluster.models import Gpu
from tests.conftest import World
from tests.monitoring.conftest import Rig, batch, gpu_sample, post


def test_the_cluster_page_shows_every_gpu_in_bounded_queries(
    rig: Rig, world: World, django_assert_max_num_queries: Any
) -> None:
    post(batch([gpu_sample(i, DCGM_FI_DEV_GPU_UTIL=77) for i in range(8)]), rig.token)
    Gpu.objects.filter(node=rig.node, index=3).update(healthy=False)
    rig.node.cordoned = True
    rig.node.save()
    admin = Client()
    admin.force_login(world.admin)
    with django_assert_max_num_queries(8):
        body = admin.get("/cluster/").content.decode()
    assert body.count('class="gpu') == 8 and body.count("77%") == 8
    assert body.count("gpu faulty") == 1 and 'class="cordoned' in body
