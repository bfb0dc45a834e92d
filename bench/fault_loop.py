"""The fault loop's speed, and alert evaluation at scale.

1. Fault to cordon. The demo's roles in this process, on real time: kubesim (speed 1), the
   controller, the portal's ASGI application under uvicorn (the agents' endpoint) and one agent
   per node sampling at 1 Hz. A job of eight GPUs runs; then one of its GPUs is lost (kubesim's
   `gpu-lost`: Xid 79, the catalogue's reboot). Measured from the injection: the Xid stored by
   the portal, the node cordoned (goal ≤ 10 s), the job running again on another node.
2. Alert evaluation. 1,000 nodes of eight GPUs (8,000), each GPU's latest sample holding every
   field the agents send, 20 enabled rules (the 11 defaults and 9 more, some scoped to a team or
   a node), a few subjects past a threshold; `evaluate_alerts` rounds 5 s of its clock apart, as
   the controller's duty runs them (the first opens alerts, later ones fire and notify them).
   Goal: ≤ 200 ms a round. Each round's CPU time is printed too: on a busy machine it varies
   less than the wall time.

    python bench/fault_loop.py [--json] [--rounds 15] [--only fault|alerts]

SQLite in a temporary directory (the demo's embedded defaults); everything it talks to is on
127.0.0.1, and it stops by itself (every wait is bounded).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CORDON_GOAL_S = 10.0
ROUND_GOAL_MS = 200.0
NODES, GPUS_PER_NODE = 1000, 8
RULES = 20
WAIT_S = 120.0
PROBE_XID = 45  # the catalogue's no-op: tells when the agent's Xid watcher is listening


def _setup_django(directory: str) -> None:
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.update(
        PORTAL_VAR_DIR=directory,
        DJANGO_SETTINGS_MODULE="portal.settings",
        LOG_LEVEL="ERROR",
        DEBUG="0",
        EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",  # not on the console
    )
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    # The embedded cache keeps 300 entries by default: one per node's latest samples, so 1,000
    # nodes would lose most of theirs (the demo has 12; production shares Redis).
    cache: dict[str, Any] = settings.CACHES["default"]
    cache.setdefault("OPTIONS", {})["MAX_ENTRIES"] = 100_000

    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _until(probe: Callable[[], Any], what: str, every: float = 0.01) -> float:
    """Poll until `probe()` holds; the time.monotonic() it first held (bounded by WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if probe():
            return time.monotonic()
        time.sleep(every)
    raise SystemExit(f"gave up after {WAIT_S:g} s waiting for {what}")


def _serve(port: int) -> Any:
    import uvicorn

    config = uvicorn.Config(
        "portal.asgi:application", host="127.0.0.1", port=port, log_level="error"
    )
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, name="uvicorn", daemon=True).start()
    _until(lambda: server.started, "uvicorn")
    return server


def fault_to_cordon() -> dict[str, float]:
    """Seconds from a lost GPU under a running job to the Xid stored, the node cordoned, the
    job running again."""
    from django.contrib.auth.models import User

    from cluster.models import Node
    from jobs.actions import submit_job
    from jobs.models import Job, State
    from jobs.spec import parse_spec
    from monitoring.models import XidEvent
    from portal import roles
    from tenants.models import Team

    stop = threading.Event()
    sim = roles.start_cluster(1.0)
    port = _free_port()
    server = _serve(port)
    try:
        roles.start_controller(stop)
        agents = (sim, f"http://127.0.0.1:{port}", stop, 1.0)
        threading.Thread(target=roles.start_agents, args=agents, daemon=True).start()
        spec = {
            "name": "bench-fault",
            "team": "vision",
            "image": "bench:1",
            "command": ["train"],
            "gpu_type": "h100-80g",
            "gpus_per_node": 8,
            "env": {"KUBESIM_RUNTIME_SECONDS": "3600"},
        }
        team, bob = Team.objects.get(slug="vision"), User.objects.get(username="bob")
        job = submit_job(team, parse_spec(spec), acting_user=bob)
        running = Job.unscoped.filter(pk=job.pk, state=State.RUNNING)
        _until(running.exists, "the job to run", every=0.1)
        (node,) = running.get().placement

        def heard() -> bool:
            sim.inject_fault("xid", node, gpu=0, xid=PROBE_XID)
            return XidEvent.objects.filter(node__name=node, xid=PROBE_XID).exists()

        _until(heard, "the agent's Xid watcher", every=0.5)
        injected = time.monotonic()
        sim.inject_fault("gpu-lost", node, gpu=3)
        stored = _until(
            XidEvent.objects.filter(node__name=node, xid=79).exists, "the Xid to be stored"
        )
        cordoned = _until(
            Node.objects.filter(name=node, cordoned=True).exists, "the node to be cordoned"
        )
        again = Job.unscoped.filter(pk=job.pk, state=State.RUNNING, attempts__gte=2)
        rerun = _until(again.exists, "the job to run again")
        assert node not in again.get().placement
        return {
            "xid_stored_s": round(stored - injected, 2),
            "cordoned_s": round(cordoned - injected, 2),
            "running_again_s": round(rerun - injected, 2),
        }
    finally:
        stop.set()
        server.should_exit = True
        sim.stop()
        time.sleep(1.0)  # the controller's and agents' threads see `stop` and let go


EXTRA_RULES = [
    # name, metric, scope, scope value, below, warning, critical, duration
    ("GPU idle", "DCGM_FI_DEV_GPU_UTIL", "cluster", "", True, 1, None, 600),
    ("SM idle", "DCGM_FI_PROF_SM_ACTIVE", "cluster", "", True, 0.01, None, 600),
    ("GPU memory full", "DCGM_FI_DEV_FB_USED", "cluster", "", False, 80000, None, 60),
    ("Power high", "DCGM_FI_DEV_POWER_USAGE", "cluster", "", False, 690, 700, 60),
    ("ECC corrected errors", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "cluster", "", False, 100, None, 0),
    ("PCIe TX saturated", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "cluster", "", False, 3e7, None, 60),
    ("Xid seen", "DCGM_FI_DEV_XID_ERRORS", "cluster", "", False, 1, None, 0),
    ("Vision pending", "portal_job_pending_seconds", "team", "vision", False, 600, None, 0),
    ("Hot node", "DCGM_FI_DEV_GPU_TEMP", "node", "bench-0", False, 70, 80, 0),
]


def _sample(index: int, at: float, hot: bool, job_id: int | None) -> dict[str, Any]:
    from monitoring.schema import METRICS

    sample: dict[str, Any] = dict.fromkeys(METRICS, 0)
    sample.update(
        index=index,
        at=at,
        job_id=job_id,
        DCGM_FI_DEV_GPU_UTIL=60,
        DCGM_FI_PROF_SM_ACTIVE=0.5,
        DCGM_FI_DEV_FB_USED=40000.0,
        DCGM_FI_DEV_FB_TOTAL=81559.0,
        DCGM_FI_DEV_GPU_TEMP=86 if hot else 55,
        DCGM_FI_DEV_POWER_USAGE=450.0,
        PORTAL_NVLINK_LINKS_UP=18,
    )
    return sample


def _large_cluster(at: float) -> dict[int, dict[int, dict[str, Any]]]:
    """1,000 nodes, half their GPUs under running jobs, every GPU's latest sample cached;
    one GPU in 200 hot, one node NotReady; the default rules and more, RULES in all. Returns
    the samples, for the rounds to refresh as the agents would."""
    from django.contrib.auth.models import User

    from cluster.models import Node
    from jobs.actions import submit_job
    from jobs.models import Job, State
    from jobs.spec import parse_spec
    from monitoring import hot
    from monitoring.models import AlertRule
    from quotas.models import GpuType
    from tenants.models import Team

    h100 = GpuType.objects.get(name="h100-80g")
    Node.objects.bulk_create(
        Node(
            name=f"bench-{n}",
            gpu_type=h100,
            gpu_capacity=GPUS_PER_NODE,
            gpu_allocatable=GPUS_PER_NODE,
            ready=n != 7,
        )
        for n in range(NODES)
    )
    team, bob = Team.objects.get(slug="vision"), User.objects.get(username="bob")
    spec = {"name": "b", "team": "vision", "image": "b:1", "command": ["x"], "gpus_per_node": 8}
    job_ids = [
        submit_job(team, parse_spec(spec | {"gpu_type": "h100-80g"}), acting_user=bob).pk
        for _ in range(NODES // 2)
    ]
    Job.unscoped.filter(pk__in=job_ids).update(state=State.RUNNING)
    nodes = dict(Node.objects.filter(name__startswith="bench-").values_list("name", "id"))
    latest: dict[int, dict[int, dict[str, Any]]] = {}
    for n in range(NODES):
        job_id = job_ids[n // 2] if n % 2 == 0 else None
        latest[nodes[f"bench-{n}"]] = {
            i: _sample(i, at, hot=(n * GPUS_PER_NODE + i) % 200 == 0, job_id=job_id)
            for i in range(GPUS_PER_NODE)
        }
    hot.store(latest)
    defaults = AlertRule.objects.filter(enabled=True).count()
    for name, metric, scope, value, below, warning, critical, duration in EXTRA_RULES[
        : RULES - defaults
    ]:
        AlertRule.objects.create(
            name=name,
            metric=metric,
            scope=scope,
            scope_value=value,
            below=below,
            warning=warning,
            critical=critical,
            duration_s=duration,
        )
    assert AlertRule.objects.filter(enabled=True).count() == RULES
    return latest


def alert_rounds(rounds: int) -> dict[str, Any]:
    """Milliseconds per `evaluate_alerts` round over 8,000 GPUs and 20 rules."""
    from django.utils import timezone

    from monitoring import hot
    from monitoring.alerts.figures import gather, read
    from monitoring.alerts.round import evaluate_alerts
    from monitoring.models import AlertRule

    now = timezone.now()
    latest = _large_cluster(now.timestamp())
    metrics = set(AlertRule.objects.filter(enabled=True).values_list("metric", flat=True))
    started = time.perf_counter()
    read(now, metrics)  # what a round reads: the samples, the node and job figures its rules name
    gather_ms = (time.perf_counter() - started) * 1000
    subjects = sum(len(values) for values in gather(now, metrics).values())  # values compared
    times, cpu, fired = [], [], 0
    for turn in range(rounds):
        at = now + timedelta(seconds=5 * turn)
        for samples in latest.values():  # the agents went on sending (not timed)
            for sample in samples.values():
                sample["at"] = at.timestamp()
        hot.store(latest)
        started, started_cpu = time.perf_counter(), time.process_time()
        done = evaluate_alerts(at)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)  # less noisy on a busy machine
        fired += len(done.fired)
    return {
        "gpus": NODES * GPUS_PER_NODE,
        "rules": RULES,
        "values_per_round": subjects,
        "gather_ms": round(gather_ms, 1),
        "first_round_ms": round(times[0], 1),
        "round_p50_ms": round(statistics.median(times), 1),
        "round_max_ms": round(max(times), 1),
        "round_cpu_p50_ms": round(statistics.median(cpu), 1),
        "round_cpu_max_ms": round(max(cpu), 1),
        "rounds": rounds,
        "alerts_fired": fired,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--rounds", type=int, default=15, help="alert rounds, 5 s apart")
    parser.add_argument("--only", choices=["fault", "alerts"], help="run one part (default: both)")
    args = parser.parse_args()
    if not 2 <= args.rounds <= 1000:
        parser.error(f"--rounds: must be between 2 and 1000, got {args.rounds}")
    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fault-loop-") as directory:
        _setup_django(directory)
        if args.only in (None, "fault"):
            figures["fault"] = fault_to_cordon()
        if args.only in (None, "alerts"):
            figures["alerts"] = alert_rounds(args.rounds)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    if fault := figures.get("fault"):
        _print_fault(fault)
    if alerts := figures.get("alerts"):
        _print_alerts(alerts)


def _print_fault(fault: dict[str, Any]) -> None:
    print("fault loop (agents at 1 Hz, kubesim at speed 1, lost GPU under a running job):")
    print(f"  Xid stored by the portal  {fault['xid_stored_s']:6.2f} s")
    print(f"  node cordoned             {fault['cordoned_s']:6.2f} s   goal ≤ {CORDON_GOAL_S:g} s")
    print(f"  job running again         {fault['running_again_s']:6.2f} s")


def _print_alerts(alerts: dict[str, Any]) -> None:
    print(
        f"alert evaluation ({alerts['gpus']:,} GPUs × {alerts['rules']} rules, "
        f"{alerts['values_per_round']:,} values a round, {alerts['rounds']} rounds):"
    )
    print(f"  reading alone             {alerts['gather_ms']:6.1f} ms")
    print(f"  first round               {alerts['first_round_ms']:6.1f} ms")
    print(
        f"  round p50                 {alerts['round_p50_ms']:6.1f} ms   "
        f"goal ≤ {ROUND_GOAL_MS:g} ms"
    )
    fired = alerts["alerts_fired"]
    print(f"  round max                 {alerts['round_max_ms']:6.1f} ms   ({fired} alerts fired)")
    print(f"  round CPU p50             {alerts['round_cpu_p50_ms']:6.1f} ms")
    print(f"  round CPU max             {alerts['round_cpu_max_ms']:6.1f} ms")


if __name__ == "__main__":
    main()
