"""The all-in-one demo: kubesim, the controller, node agents and the web role in one process.

Production runs each role as its own process (see the README); here they are threads beside
uvicorn, sharing SQLite (WAL) and the in-memory channel layer.
"""

from __future__ import annotations

import logging
import random
import tempfile
import threading
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import close_old_connections, connection

from agent.embedded import run_agents
from cluster import connect
from cluster.controller import Controller
from cluster.kube import KubernetesBackend, load_api_client
from cluster.models import Node
from jobs.actions import submit_job
from jobs.spec import SpecError, parse_spec
from kubesim import KubeSim
from monitoring.tokens import rotate_node_token
from tenants.models import Team

log = logging.getLogger(__name__)
SAMPLE_JOBS = [  # (name, gpu type, nodes, gpus per node, queue, mean runtime in s)
    ("resnet50-sweep", "h100-80g", 1, 1, "low-preemptible", 300),
    ("vit-finetune", "h100-80g", 1, 4, "normal", 600),
    ("llm-pretrain", "h100-80g", 2, 8, "normal", 1800),
    ("detr-eval", "a100-80g", 1, 2, "high", 120),
    ("whisper-distill", "a100-80g", 1, 8, "normal", 900),
]
TRAFFIC_USERS = [("bob", "vision"), ("alice", "vision"), ("carol", "nlp")]


def start_cluster(speed: float) -> KubeSim:
    sim = KubeSim(speed=speed)
    sim.start()
    path = Path(settings.VAR_DIR) / "kubesim.kubeconfig"
    sim.write_kubeconfig(path)
    settings.KUBECONFIG = str(path)  # the web role's cordon actions use the same cluster
    connect.backend.cache_clear()
    return sim


def start_controller(stop: threading.Event) -> threading.Thread:
    """The controller in a thread until `stop`; then its log followers and Kubernetes calls
    stop too, and its database connections go back (a process that goes on, as the tests'
    live portals do, would otherwise keep them from the pool)."""
    controller = Controller(KubernetesBackend(load_api_client(settings.KUBECONFIG)))

    def run() -> None:
        try:
            controller.run(stop)
        finally:
            controller.followers.shutdown()
            controller.kube.shutdown()
            connection.close()

    thread = threading.Thread(target=run, name="controller", daemon=True)
    thread.start()
    return thread


def start_agents(
    sim: KubeSim, portal_url: str, stop: threading.Event, interval: float = 5.0
) -> None:
    """Once the controller has listed the nodes, give each an agent on its fake NVML and its
    simulated InfiniBand sysfs tree."""
    deadline = time.monotonic() + 60
    while Node.objects.count() == 0 and time.monotonic() < deadline:
        if stop.wait(0.5):  # stopped before any node was listed: rotate no token
            return
    if stop.is_set():
        return
    tokens = {node.name: rotate_node_token(node) for node in Node.objects.all()}
    libraries = {name: sim.nvml_library(name) for name in tokens}
    kubelets = tempfile.mkdtemp(prefix="kubelets-")  # each node's pod-resources socket
    sockets = {name: sim.pod_resources_socket(name, kubelets) for name in tokens}
    fabric = sim.infiniband(tempfile.mkdtemp(prefix="infiniband-"))
    fabric.start(stop)
    run_agents(
        libraries,
        portal_url,
        tokens.__getitem__,
        stop,
        interval=interval,
        pod_resources_by_node=sockets,
        ib_roots_by_node={name: fabric.root(name) for name in tokens},
    )
    close_old_connections()


def _traffic(stop: threading.Event) -> None:
    rng = random.Random(7)
    while not stop.wait(rng.uniform(2, 6)):
        username, slug = rng.choice(TRAFFIC_USERS)
        name, gpu, nodes, gpus, queue, mean = rng.choice(SAMPLE_JOBS)
        runtime = max(30, int(rng.lognormvariate(0, 0.6) * mean))
        spec = {
            "name": f"{name}-{rng.randrange(1000):03d}",
            "team": slug,
            "queue": queue,
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "command": ["python", "train.py"],
            "gpu_type": gpu,
            "nodes": nodes,
            "gpus_per_node": gpus,
            "env": {
                "KUBESIM_RUNTIME_SECONDS": str(runtime),
                "KUBESIM_EXIT_CODE": "1" if rng.random() < 0.1 else "0",
                "KUBESIM_GPU_UTIL": str(rng.randint(35, 98)),
            },
        }
        try:
            submit_job(
                Team.objects.get(slug=slug),
                parse_spec(spec),
                acting_user=User.objects.get(username=username),
            )
        except SpecError as exc:
            log.info("demo traffic: %s", exc)
        close_old_connections()


def start_traffic(stop: threading.Event) -> threading.Thread:
    """DEMO_TRAFFIC=1: a stream of sample jobs from several teams, so the portal looks alive."""
    thread = threading.Thread(target=_traffic, args=(stop,), name="traffic", daemon=True)
    thread.start()
    return thread
