"""The controller's probes over HTTP: alive while its loop turns, ready while the database
answers and, when it leads, the Kubernetes API (kubesim) answers too."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from cluster.probes import Probes, serve
from tests.cluster.conftest import Cluster

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def probed(cluster: Cluster) -> Iterator[tuple[Cluster, str]]:
    server = serve(Probes(cluster.controller, stale_after_s=60), 0, host="127.0.0.1")
    try:
        yield cluster, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _status(url: str) -> tuple[int, str]:
    response = httpx.get(url, timeout=10)
    return response.status_code, response.text


def test_a_standby_is_alive_and_ready_while_the_database_answers(
    probed: tuple[Cluster, str],
) -> None:
    cluster, url = probed
    assert not cluster.controller.leading
    assert _status(f"{url}/healthz") == (200, "ok")
    assert _status(f"{url}/readyz") == (200, "ok")
    assert _status(f"{url}/metrics")[0] == 404


def test_a_leader_that_cannot_reach_kubernetes_is_not_ready(probed: tuple[Cluster, str]) -> None:
    cluster, url = probed
    cluster.drive(lambda: True)  # leads and turns
    assert cluster.controller.leading
    assert _status(f"{url}/readyz") == (200, "ok")
    cluster.sim.stop()
    assert _status(f"{url}/readyz") == (503, "not ready")
    assert _status(f"{url}/healthz") == (200, "ok")  # alive: restarting it would not help


def test_a_loop_that_stopped_turning_is_not_alive(probed: tuple[Cluster, str]) -> None:
    cluster, url = probed
    cluster.controller.turned_at = cluster.ticks()
    assert _status(f"{url}/healthz") == (200, "ok")
    cluster.ticks.advance(61)  # no turn for longer than stale_after_s
    assert _status(f"{url}/healthz") == (503, "stuck")
    cluster.controller.turned_at = cluster.ticks()
    assert _status(f"{url}/healthz") == (200, "ok")
