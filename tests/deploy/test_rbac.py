"""Each role's ClusterRole grants exactly the calls its code makes, no more.

The calls are recorded where they arrive: kubesim's HTTP server, with the real adapter
(cluster/kube.py) and the real controller driving it through a job's whole life. Each request
is turned into the (verb, API group, resource) that Kubernetes' RBAC authorises. The tables
below say what each role calls and why; the recording keeps them true, the rendered
ClusterRoles are held against them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from django.utils import timezone

from cluster.actions import set_cordon
from cluster.controller import Controller
from cluster.kube import KubernetesBackend, load_api_client
from cluster.manifests import JOB_NAME_LABEL, LABEL_JOB, companion_objects, deadline_patch
from cluster.models import Node
from jobs.actions import cancel_job
from jobs.models import State
from kubesim import KubeSim
from kubesim.errors import ApiError
from kubesim.routing import parse
from scheduler import PolicyConfig
from tests.cluster.conftest import FAST, SPEED, Cluster, SkippingClock, SteppedClock
from tests.conftest import World
from tests.deploy.conftest import Obj, find, of_kind

Call = tuple[str, str, str]  # (verb, API group, resource[/subresource])

APPLIED = {"create", "patch"}  # KubernetesBackend.apply: create; on 409, merge-patch
CONTROLLER_CALLS: set[Call] = {
    # cluster/provision.py: each team's namespace objects (cluster.manifests.team_objects) and
    # the queues' PriorityClasses; cluster/kubecalls.py: a multi-pod job's Service and
    # NetworkPolicy (cluster.manifests.companion_objects).
    *(
        (verb, "", resource)
        for verb in APPLIED
        for resource in (
            "namespaces",
            "resourcequotas",
            "limitranges",
            "serviceaccounts",
            "services",
        )
    ),
    *((verb, "networking.k8s.io", "networkpolicies") for verb in APPLIED),
    *((verb, "scheduling.k8s.io", "priorityclasses") for verb in APPLIED),
    # cluster/kubecalls.py: create_job, delete_job, expire_job (the TTL of a finished Job).
    ("create", "batch", "jobs"),
    ("delete", "batch", "jobs"),
    ("patch", "batch", "jobs"),
    # cluster/watchers.py and cluster/reconcile.py: list, then watch from its resourceVersion.
    *((verb, "batch", "jobs") for verb in ("list", "watch")),
    *((verb, "", kind) for verb in ("list", "watch") for kind in ("pods", "nodes", "events")),
    # cluster/logs.py: follow_log.
    ("get", "", "pods/log"),
    # cluster/kubecalls.py: a preemption notice annotates the victim's pods (downward API).
    ("patch", "", "pods"),
}
WEB_CALLS: set[Call] = {
    # cluster/actions.py set_cordon -> KubernetesBackend.set_unschedulable: read the node's
    # taints, then merge-patch spec.unschedulable and the cordon taint.
    ("get", "", "nodes"),
    ("patch", "", "nodes"),
}
NO_API_ACCESS = ("portal-ws", "portal-worker", "portal-agent")


def authorised_as(method: str, path: str, query: dict[str, str]) -> Call:
    """The RBAC attributes of one request, as the API server's authoriser derives them."""
    try:
        route = parse(path)
    except ApiError:
        return ("non-resource", "", path)
    resource = route.resource.plural + (f"/{route.sub}" if route.sub else "")
    if method == "GET":
        verb = "watch" if query.get("watch") in ("true", "1") else "get" if route.name else "list"
    elif method == "DELETE":
        verb = "delete" if route.name else "deletecollection"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}[method]
    return (verb, route.resource.group, resource)


class Recorder:
    """Wraps kubesim's dispatch (before it starts serving) to note every request's attributes."""

    def __init__(self, sim: KubeSim, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: set[Call] = set()
        dispatch: Callable[[web.Request], Awaitable[web.StreamResponse]] = sim.server.dispatch

        async def recording(request: web.Request) -> web.StreamResponse:
            self.calls.add(authorised_as(request.method, request.path, dict(request.query)))
            return await dispatch(request)

        monkeypatch.setattr(sim.server, "dispatch", recording)


def granted(rendered: list[Obj], role: str) -> set[Call]:
    rules = find(rendered, "ClusterRole", role)["rules"]
    calls = {
        (verb, group, resource)
        for rule in rules
        for verb in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert not [call for call in calls if "*" in call], "wildcards grant what no one listed"
    assert not [rule for rule in rules if "resourceNames" in rule or "nonResourceURLs" in rule]
    return calls


@pytest.fixture
def recorded(
    transactional_db: None, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Cluster, Recorder]]:
    clock = SkippingClock(SPEED)
    sim = KubeSim(clock=clock)
    recorder = Recorder(sim, monkeypatch)
    sim.start()
    sim.write_kubeconfig(tmp_path / "kubeconfig")
    backend = KubernetesBackend(load_api_client(str(tmp_path / "kubeconfig")))
    ticks = SteppedClock()
    controller = Controller(
        backend, timing=FAST, config=PolicyConfig(preemption_grace_s=2.0), clock=ticks
    )
    try:
        yield Cluster(sim, clock, backend, controller, world, ticks), recorder
    finally:
        controller.stop_leading(release=True)
        controller.followers.shutdown()
        controller.kube.shutdown()
        sim.stop()


def test_the_controller_calls_exactly_what_its_table_says(
    recorded: tuple[Cluster, Recorder],
) -> None:
    cluster, recorder = recorded
    finishing = cluster.submit(runtime_s=2)
    gang = cluster.submit(runtime_s=5000, nodes=2, gpus_per_node=8)
    cluster.drive(lambda: cluster.state(finishing) in {State.SUCCEEDED, State.FAILED})
    cluster.drive(lambda: ("patch", "batch", "jobs") in recorder.calls)  # its TTL, once recorded
    cluster.drive(lambda: cluster.state(gang) == State.RUNNING)
    cluster.drive(lambda: ("get", "", "pods/log") in recorder.calls)  # its logs are followed
    cluster.drive(lambda: ("create", "", "services") in recorder.calls)  # and its companions
    # A companion that failed is sent again (KubeCalls.retry_companions), through the same
    # apply: this time its Service and NetworkPolicy exist, so each is patched.
    (job,) = cluster.backend.list("jobs", f"{LABEL_JOB}={gang.pk}").items
    for obj in companion_objects(gang, job["metadata"]["uid"]):
        cluster.backend.apply(obj)
    # A preemption notice reaches the gang's pods as an annotation (KubeCalls._notify's call).
    pod = cluster.backend.list("pods", f"{JOB_NAME_LABEL}={job['metadata']['name']}").items[0]
    deadline = deadline_patch(timezone.now())
    assert cluster.backend.patch_pod(
        pod["metadata"]["namespace"], pod["metadata"]["name"], deadline
    )
    cancel_job(gang, acting_user=cluster.world.bob)
    cluster.drive(lambda: ("delete", "batch", "jobs") in recorder.calls)
    # After the cluster restarted, every object is sent again: each exists, each is patched.
    cluster.controller.provisioner.forget()
    assert cluster.controller.provisioner.sync() > 0
    assert recorder.calls == CONTROLLER_CALLS


def test_the_web_role_calls_exactly_what_its_table_says(
    transactional_db: None, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = KubeSim()
    recorder = Recorder(sim, monkeypatch)
    with sim:
        sim.write_kubeconfig(tmp_path / "kubeconfig")
        backend = KubernetesBackend(load_api_client(str(tmp_path / "kubeconfig")))
        name = backend.list("nodes").items[0]["metadata"]["name"]
        recorder.calls.clear()
        node = Node.objects.create(name=name, ready=True)
        for cordon in (True, False):
            set_cordon(node, cordon, reason="maintenance", acting_user=world.admin, backend=backend)
    assert recorder.calls == WEB_CALLS


def test_the_controller_role_grants_every_call_the_controller_makes(rendered: list[Obj]) -> None:
    assert CONTROLLER_CALLS - granted(rendered, "gpu-portal-controller") == set()


def test_the_controller_role_grants_nothing_the_controller_does_not_call(
    rendered: list[Obj],
) -> None:
    assert granted(rendered, "gpu-portal-controller") - CONTROLLER_CALLS == set()


def test_the_web_role_grants_exactly_cordon(rendered: list[Obj]) -> None:
    assert granted(rendered, "gpu-portal-web") == WEB_CALLS


def test_each_role_is_bound_to_its_own_account_only(rendered: list[Obj]) -> None:
    bindings = {
        b["roleRef"]["name"]: [(s["kind"], s["namespace"], s["name"]) for s in b["subjects"]]
        for b in of_kind(rendered, "ClusterRoleBinding", "RoleBinding")
    }
    assert bindings == {
        "gpu-portal-controller": [("ServiceAccount", "portal-system", "portal-controller")],
        "gpu-portal-web": [("ServiceAccount", "portal-system", "portal-web")],
    }
    assert of_kind(rendered, "Role") == []


def test_roles_without_api_calls_get_no_token(rendered: list[Obj]) -> None:
    accounts = {a["metadata"]["name"]: a for a in of_kind(rendered, "ServiceAccount")}
    for name in NO_API_ACCESS:
        assert accounts[name]["automountServiceAccountToken"] is False
    for workload in of_kind(rendered, "Deployment", "DaemonSet"):
        pod = workload["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] in accounts
