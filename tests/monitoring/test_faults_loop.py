"""The fault loop end to end: a fault injected in kubesim, read by the node's agent through its
fake NVML, posted to the portal, classified, acted on by the leading controller (cordon,
GPU out of service, requeue), recorded as an incident, notified; the job runs again."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agent.core import Agent
from audit.models import AuditEvent
from cluster.models import Gpu, Node
from jobs.models import Job, State
from monitoring.catalog import Action, classify_xid
from monitoring.endpoint import read_post
from monitoring.intake import answer
from monitoring.models import Incident, XidEvent
from monitoring.tokens import rotate_node_token
from notifications.models import Notification
from tests.cluster.conftest import Cluster, cluster  # noqa: F401 (the fixture)
from tests.kubesim.conftest import wait_for
from tests.notifications.eager import eager_celery  # noqa: F401 (autouse)

pytestmark = pytest.mark.django_db(transaction=True)


class Posted:
    """The agent's transport: keeps its batches for the test to deliver in its own thread."""

    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def post(self, batch: dict[str, Any]) -> None:
        with self.lock:
            self.batches.append(json.loads(json.dumps(batch)))

    def deliver(self, token: str) -> None:
        with self.lock:
            batches, self.batches = self.batches, []
        for batch in batches:
            ((reply, _),) = answer([read_post(token, "POST", json.dumps(batch).encode())])
            assert reply.status == 202, reply.body


@pytest.fixture
def running(cluster: Cluster) -> Iterator[tuple[Job, str, Posted, str]]:  # noqa: F811
    job = cluster.submit(runtime_s=5000, gpus_per_node=8)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    (node,) = job.placement
    token = rotate_node_token(Node.objects.get(name=node))
    posted = Posted()
    agent = Agent(node, posted, interval=1.0, library=cluster.sim.nvml_library(node))
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    thread.start()
    try:
        _until_the_agent_hears_xids(cluster, node, posted)
        yield job, node, posted, token
    finally:
        stop.set()
        thread.join(timeout=10)


PROBE_XID = 45  # "preemptive cleanup": the catalogue's no-op


def _until_the_agent_hears_xids(cluster: Cluster, node: str, posted: Posted) -> None:  # noqa: F811
    """An Xid raised before the agent's watcher registers is not delivered (as with NVML):
    probe with a harmless one until one comes through."""

    def heard() -> bool:
        cluster.sim.inject_fault("xid", node, gpu=0, xid=PROBE_XID)
        with posted.lock:
            return any(batch["xids"] for batch in posted.batches)

    wait_for(heard, timeout=30, what="the agent's Xid watcher")


def _drive(cluster: Cluster, posted: Posted, token: str, until: Any) -> None:  # noqa: F811
    def delivered_and() -> bool:
        posted.deliver(token)
        return bool(until())

    cluster.drive(delivered_and)


CASES = [
    # kubesim fault, its options, the action, whether the node is cordoned, the GPU taken out
    ("xid", {"xid": 13}, Action.RESTART_JOB, False, False),
    ("ecc-dbe", {}, Action.RESET_GPU, False, True),
    ("gpu-lost", {}, Action.REBOOT, True, True),
    ("row-remap-failed", {}, Action.REPLACE_GPU, True, True),
]


@pytest.mark.parametrize(("kind", "options", "action", "cordoned", "gpu_out"), CASES)
def test_a_fault_is_classified_acted_on_recorded_and_the_job_runs_again(
    cluster: Cluster,  # noqa: F811
    running: tuple[Job, str, Posted, str],
    kind: str,
    options: dict[str, int],
    action: Action,
    cordoned: bool,
    gpu_out: bool,
) -> None:
    job, node, posted, token = running
    cluster.sim.inject_fault(kind, node, gpu=2, **options)
    _drive(cluster, posted, token, lambda: Incident.objects.exists())
    incident = Incident.objects.get()
    assert incident.action == action and incident.nodes == [node]
    assert incident.jobs == [job.pk] and incident.teams == ["vision"]
    assert f"{node}/2" in incident.gpus
    kinds = list(incident.events.values_list("kind", flat=True))
    assert kinds[0] == "fault" and "action" in kinds and kinds[-1] == "notification"
    assert Node.objects.get(name=node).cordoned is cordoned
    assert Gpu.objects.get(node__name=node, index=2).healthy is not gpu_out
    assert AuditEvent.chain.filter(action="node.cordon").exists() is cordoned
    assert AuditEvent.chain.filter(action="incident.open", target_id=str(incident.pk)).exists()
    # The job: NODE_FAILED, back in the queue counting the attempt, then running again.
    _drive(cluster, posted, token, lambda: cluster.state(job) == State.RUNNING)
    moves = list(job.events.values_list("to_state", flat=True))
    assert moves[-3:] == [State.NODE_FAILED, State.QUEUED, State.ADMITTED] or moves[-4:-1] == [
        State.NODE_FAILED,
        State.QUEUED,
        State.ADMITTED,
    ]
    assert job.attempts == 2
    if cordoned or gpu_out:
        assert node not in job.placement  # eight GPUs: not on a node with one out
    owner_told = Notification.objects.filter(user=cluster.world.bob, link=f"/jobs/{job.pk}/")
    assert owner_told.count() == 1
    admin_told = Notification.objects.filter(
        user=cluster.world.admin, link=f"/incidents/{incident.pk}/"
    )
    assert admin_told.count() == 1
    assert not XidEvent.objects.filter(handled_at=None).exists()


def test_the_catalogue_classifies_every_xid_the_issue_names() -> None:
    expected = {
        13: Action.RESTART_JOB,
        31: Action.RESTART_JOB,
        43: Action.RESTART_JOB,
        45: Action.NONE,
        48: Action.RESET_GPU,
        61: Action.RESET_GPU,
        62: Action.RESET_GPU,
        63: Action.RESET_GPU,
        64: Action.RESET_GPU,
        68: Action.RESTART_JOB,
        69: Action.RESTART_JOB,
        74: Action.RESET_GPU,
        79: Action.REBOOT,
        92: Action.NONE,
        94: Action.RESTART_JOB,
        95: Action.RESET_GPU,
        119: Action.RESET_GPU,
        120: Action.RESET_GPU,
        154: Action.REBOOT,
        9999: Action.NONE,
    }
    assert {xid: classify_xid(xid) for xid in expected} == expected
