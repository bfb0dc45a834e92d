"""Replay the Kueue baseline scenario in real time through the whole portal.

Jobs are submitted through `jobs.actions.submit_job` (the action the API uses) from separate
processes, at the scenario's arrival times, two of them as a two-process web tier would; the
controller (this process) schedules them and runs them on kubesim (a third process, speed 1)
through the official client. Prints wall time, GPU usage and average time to admission per class
beside Kueue's published figures, and the controller's CPU per admitted job.

    python bench/e2e_kueue_baseline.py [--scale 1.0] [--json] [--container-start-s 0]

`--scale 0.1` replays a tenth of each team's jobs (for a quick look). Kueue's runner starts a
workload's runtime at its admission, with no pod to start; kubesim's containers therefore start
at once here, unless `--container-start-s` gives them its usual second (or any other time), which
adds that time to every job's hold on its GPUs. Needs PostgreSQL on
127.0.0.1:5432 (BENCH_DATABASE_URL overrides); everything stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.postgres import ROOT, fresh_database, use_environment

SCENARIO = ROOT / "bench" / "scenarios" / "kueue-baseline.yaml"
DATABASE = "portal_e2e"
KUEUE = {"wall_s": 351.0, "usage_pct": 58.7, "large": 6.7, "medium": 76.8, "small": 215.5}
PRODUCT = "KUBESIM-UNIT-GPU"


def _scenario() -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(SCENARIO.read_text()))


def _arrivals(scenario: dict[str, Any], scale: float) -> list[tuple[float, str, dict[str, Any]]]:
    """(submit offset s, team slug, workload) for every job, in time order."""
    teams = scenario["departments"] * scenario["teams_per_department"]
    out = []
    for t in range(teams):
        for load in scenario["workloads_per_team"]:
            for i in range(max(1, int(load["count"] * scale))):
                out.append((i * load["interval_ms"] / 1000, f"team-{t}", load))
    return sorted(out, key=lambda row: row[0])


def _setup(scenario: dict[str, Any]) -> None:
    """Teams in departments, one GPU type, quotas and a queue per job class."""
    from django.contrib.auth.models import User

    from quotas.models import GpuType, Queue, Quota
    from tenants.models import Membership, Team

    cluster, quota = scenario["cluster"], scenario["quota_per_team"]
    gpu = GpuType.objects.create(
        name="unit", product_label=PRODUCT, memory_gb=80, gpus_per_node=cluster["gpus_per_node"]
    )
    user = User.objects.create_user("bench")
    per_department = scenario["teams_per_department"]
    for d in range(scenario["departments"]):
        department = Team.objects.create(slug=f"dept-{d}", name=f"Department {d}")
        for t in range(d * per_department, (d + 1) * per_department):
            team = Team.objects.create(slug=f"team-{t}", name=f"Team {t}", parent=department)
            Membership.objects.create(team=team, user=user)
            Quota.objects.create(
                team=team, gpu_type=gpu, guaranteed=quota["guaranteed"], limit=quota["limit"]
            )
            for load in scenario["workloads_per_team"]:
                Queue.objects.create(
                    team=team,
                    name=load["class"],
                    priority=load["priority"],
                    preemptible=True,
                    max_runtime=3600,
                )


def _cluster_file(scenario: dict[str, Any], directory: Path, container_start_s: float) -> Path:
    import yaml

    cluster = scenario["cluster"]
    path = directory / "cluster.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "containerStartSeconds": container_start_s,
                "pools": [
                    {
                        "name": "unit",
                        "count": cluster["nodes"],
                        "gpuProduct": PRODUCT,
                        "gpusPerNode": cluster["gpus_per_node"],
                        "gpuMemoryMiB": 81920,
                        "cpu": "256",
                        "memory": "2Ti",
                        "rack": "r",
                    }
                ],
            }
        )
    )
    return path


ARRIVAL = "BENCH_ARRIVAL_AT"
"""Each job's env carries its arrival time in the scenario, so its wait can be told from there
too: a submission that fell behind the scenario starts its admission clock late."""

SUBMITTERS = 2
"""Processes submitting at once (`--submitters`): a web tier of two processes, each running one
submission at a time (Django's sync views run on one thread per ASGI process), as in
`bench/api_submit.py`. One alone, each submission's round trips and commit (about 5 ms) would cap
arrivals near 200 a second, below the scenario's 250. (Threads of one process would share one
interpreter lock, which two web processes do not.)"""


def submitter(scale: float, start_at: float, part: int, parts: int) -> None:
    """One submitting process: every `parts`-th arrival from `part`, at its arrival time,
    through the action."""
    import django

    os.environ["DB_POOL_SIZE"] = "1"
    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection

    from jobs.actions import submit_job
    from jobs.spec import parse_spec
    from tenants.models import Team

    user = User.objects.get(username="bench")
    teams = {t.slug: t for t in Team.objects.all()}
    try:
        for offset, slug, load in _arrivals(_scenario(), scale)[part::parts]:
            delay = start_at + offset - time.time()
            if delay > 0:
                time.sleep(delay)
            spec = {
                "name": load["class"],
                "image": "bench:1",
                "command": ["run"],
                "queue": load["class"],
                "gpu_type": "unit",
                "gpus_per_node": load["gpus"],
                "env": {
                    "KUBESIM_RUNTIME_SECONDS": str(load["runtime_ms"] / 1000),
                    ARRIVAL: f"{start_at + offset:.3f}",  # when the scenario submits it
                },
            }
            submit_job(teams[slug], parse_spec(spec), acting_user=user)
    finally:
        connection.close()


def _cpu_s(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def _reference_ms() -> float:
    """CPU time of a fixed pure-Python workload: this machine's speed at the moment.

    The same code's figures move by a third and more between runs on a shared machine; the
    bench measures this before and after its run, so that runs (and machines) can be compared.
    """
    started = time.process_time()
    table: dict[int, list[int]] = {}
    for i in range(300_000):
        table.setdefault(i % 1000, []).append(i * 7 % 13)
    sorted(table.items(), key=lambda item: sum(item[1]))
    return round(1000 * (time.process_time() - started), 1)


def _postgres_cpu_s() -> float:
    """CPU of every PostgreSQL process so far, ended backends included (their server reaps
    them into its children's time); 0 where the server runs out of sight."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended meanwhile
            continue
        name, fields = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1]
        if name.startswith("postgres"):
            total += sum(int(f) for f in fields.split()[11:15])  # utime stime cutime cstime
    return total / ticks


class _Vacuum:
    """What autovacuum would do, where the server runs without it (this machine's PostgreSQL
    does): without it the job table's dead rows pile up and its statistics go stale, and the
    planner scans thousands of rows for queries that touch a few. Its CPU counts as PostgreSQL's.
    """

    EVERY_S = 10.0
    TABLES = "jobs_job, jobs_jobevent, cluster_joblogchunk, audit_auditevent, audit_audithead"

    def __init__(self) -> None:
        import psycopg

        self.connection = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        self.needed = self.connection.execute("SHOW autovacuum").fetchone() == ("off",)
        self.last = time.monotonic()
        if self.needed:
            print(f"autovacuum is off: the bench vacuums and analyzes every {self.EVERY_S:.0f} s")

    def when_due(self) -> None:
        if self.needed and time.monotonic() - self.last >= self.EVERY_S:
            self.connection.execute(f"VACUUM (ANALYZE) {self.TABLES}")
            self.last = time.monotonic()


def _figures(scale: float, cpu_s: dict[str, float], gpus: int) -> dict[str, Any]:
    from django.db.models import Max, Min

    from jobs.models import Job, JobEvent, State

    jobs = Job.unscoped.select_related("queue")
    span = jobs.aggregate(
        first=Min("submitted_at"), submitted=Max("submitted_at"), last=Max("finished_at")
    )
    wall = (span["last"] - span["first"]).total_seconds() if span["last"] else 0.0
    used, waits, from_arrival = 0.0, defaultdict(list), defaultdict(list)
    for job in jobs.filter(state=State.SUCCEEDED):
        assert job.finished_at and job.started_at and job.admitted_at
        used += (job.finished_at - job.started_at).total_seconds() * job.total_gpus
        waits[job.queue.name].append((job.admitted_at - job.submitted_at).total_seconds())
        arrival = float(job.env[ARRIVAL])
        from_arrival[job.queue.name].append(job.admitted_at.timestamp() - arrival)
    admitted = sum(len(w) for w in waits.values())
    return {
        "wall_s": round(wall, 1),
        "last_submission_s": round((span["submitted"] - span["first"]).total_seconds(), 1),
        "usage_pct": round(100 * used / (gpus * wall), 1),
        "avg_admission_s": {c: round(sum(w) / len(w), 2) for c, w in sorted(waits.items())},
        "avg_admission_from_arrival_s": {
            c: round(sum(w) / len(w), 2) for c, w in sorted(from_arrival.items())
        },
        "controller_cpu_ms_per_job": round(1000 * cpu_s["controller"] / max(1, admitted), 2),
        "cpu_ms_per_job": {
            role: round(1000 * seconds / max(1, admitted), 2) for role, seconds in cpu_s.items()
        },
        "jobs": jobs.count(),
        "preempted": JobEvent.unscoped.filter(to_state=State.PREEMPTED).count(),
        "ran_again_after_failure": JobEvent.unscoped.filter(to_state=State.NODE_FAILED).count(),
        "succeeded": admitted,
        "scale": scale,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--container-start-s",
        type=float,
        default=0.0,
        help="kubesim's time from a pod's binding to its container running (default 0: Kueue's "
        "runner counts a workload's runtime from its admission, with no pod to start)",
    )
    parser.add_argument("--profile", help="write a cProfile of the controller loop to this file")
    parser.add_argument("--submitter", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--part", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--submitters", type=int, default=SUBMITTERS, help="processes submitting at once"
    )
    args = parser.parse_args()
    use_environment(DATABASE, DB_POOL_SIZE="4")
    if args.submitter:
        submitter(args.scale, args.start_at, args.part, args.submitters)
        return
    scenario = _scenario()
    fresh_database(DATABASE)
    import django

    django.setup()
    _setup(scenario)
    gpus = scenario["cluster"]["nodes"] * scenario["cluster"]["gpus_per_node"]
    reference = [_reference_ms()]
    with tempfile.TemporaryDirectory() as tmp:
        figures = _run(args, Path(tmp), scenario, gpus)
    reference.append(_reference_ms())
    figures["reference_ms"] = reference
    print(json.dumps(figures) if args.json else _report(args, scenario, figures))


def _run(
    args: argparse.Namespace, tmp: Path, scenario: dict[str, Any], gpus: int
) -> dict[str, Any]:
    from cluster.controller import Controller, Timing
    from cluster.kube import KubernetesBackend, load_api_client
    from cluster.management.commands.controller import GC_THRESHOLDS
    from jobs.models import TERMINAL_STATES, Job, State
    from scheduler import PolicyConfig

    kubeconfig = tmp / "kubeconfig"
    sim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesim",
            "--cluster",
            str(_cluster_file(scenario, tmp, args.container_start_s)),
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
        ],
        cwd=ROOT,
    )
    try:
        while not kubeconfig.exists():
            time.sleep(0.1)
        backend = KubernetesBackend(load_api_client(str(kubeconfig)))
        controller = Controller(
            backend,
            config=PolicyConfig(preemption_grace_s=0.0),
            timing=Timing(debounce_s=0.05, cycle_every_s=1.0),
        )
        stop = threading.Event()
        profile = cProfile.Profile() if args.profile else None

        def run() -> None:
            if profile is None:
                controller.run(stop)
            else:
                profile.runcall(controller.run, stop)
                profile.dump_stats(args.profile)

        gc.set_threshold(*GC_THRESHOLDS)  # as `manage.py controller` does
        gc.freeze()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        while not controller.leading:
            time.sleep(0.1)
        start_at = time.time() + 2
        # Children's CPU counts once they are reaped: the submitter's, from here to its end.
        children0 = _cpu_s(resource.getrusage(resource.RUSAGE_CHILDREN))
        feeders = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--submitter",
                    "--scale",
                    str(args.scale),
                    "--start-at",
                    str(start_at),
                    "--part",
                    str(part),
                    "--submitters",
                    str(args.submitters),
                ],
                cwd=ROOT,
            )
            for part in range(args.submitters)
        ]
        cpu0, postgres0 = resource.getrusage(resource.RUSAGE_SELF), _postgres_cpu_s()
        vacuum = _Vacuum()
        waiting = [s for s in State if s not in TERMINAL_STATES]
        while True:
            time.sleep(1)
            vacuum.when_due()
            ends = [feeder.poll() for feeder in feeders]
            if any(ends):  # failed: what it did not submit never ends
                raise SystemExit("a submitter failed; see its traceback above")
            # All submitted, and none left to end (an index lookup, where counting the ended
            # jobs every second read the whole table, on the bench's PostgreSQL bill).
            submitted = all(end == 0 for end in ends)
            if submitted and not Job.unscoped.filter(state__in=waiting).exists():
                break
            if time.time() - start_at > 1800:
                break
        cpu1, postgres1 = resource.getrusage(resource.RUSAGE_SELF), _postgres_cpu_s()
        stop.set()
        for feeder in feeders:
            feeder.wait(timeout=60)
        children1 = _cpu_s(resource.getrusage(resource.RUSAGE_CHILDREN))
        thread.join(timeout=30)
    finally:
        sim.terminate()
        sim.wait(timeout=30)
    cpu = {
        "controller": _cpu_s(cpu1) - _cpu_s(cpu0),
        "submitter": children1 - children0,
        "kubesim": _cpu_s(resource.getrusage(resource.RUSAGE_CHILDREN)) - children1,
        "postgres": postgres1 - postgres0,
    }
    figures = _figures(args.scale, cpu, gpus)
    seen = sum(controller.stats.counts.values())
    figures["watch_events_per_job"] = round(seen / max(1, figures["succeeded"]), 1)
    figures["cycles"] = controller.stats.cycles
    figures["explaining_cycles"] = controller.stats.explaining
    figures["explaining_cycle_ms"] = round(
        1000 * controller.stats.explaining_seconds / max(1, controller.stats.explaining), 1
    )
    figures["cycle_ms"] = {
        phase: round(1000 * seconds / max(1, controller.stats.cycles), 1)
        for phase, seconds in {
            "all": controller.stats.cycle_seconds,
            **controller.stats.phase_seconds,
        }.items()
    }
    figures["container_start_s"] = args.container_start_s
    figures["strays_deleted"] = controller.stats.strays_deleted
    return figures


def _report(args: argparse.Namespace, scenario: dict[str, Any], figures: dict[str, Any]) -> str:
    lines = [
        f"Kueue baseline through the portal (scale {args.scale}, {figures['jobs']} jobs; "
        f"containers start {args.container_start_s:g} s after binding)",
        f"  wall   {figures['wall_s']:7.1f} s   Kueue {KUEUE['wall_s']} s   "
        f"ratio {figures['wall_s'] / KUEUE['wall_s']:.2f}",
        f"  usage  {figures['usage_pct']:7.1f} %   Kueue {KUEUE['usage_pct']} %",
        f"  last submission at {figures['last_submission_s']} s (the scenario's last arrival: "
        f"{max(offset for offset, _, _ in _arrivals(scenario, args.scale)):.1f} s)",
    ]
    for cls, wait in figures["avg_admission_s"].items():
        arrival = figures["avg_admission_from_arrival_s"][cls]
        lines.append(
            f"  {cls:<6} admitted on average in {wait:6.2f} s   Kueue {KUEUE[cls]} s"
            f"   ratio {wait / KUEUE[cls]:.2f}   ({arrival:.2f} s from the scenario's arrival)"
        )
    lines.append(f"  controller CPU {figures['controller_cpu_ms_per_job']} ms per admitted job")
    lines.append(
        f"  {figures['watch_events_per_job']} watch events per job; "
        f"{figures['cycles']} scheduling cycles ({figures['explaining_cycles']} explaining, "
        f"{figures['explaining_cycle_ms']} ms each); {figures['preempted']} preemptions"
    )
    lines.append(
        "  a cycle's wall time on average: "
        + ", ".join(f"{phase} {ms} ms" for phase, ms in figures["cycle_ms"].items())
    )
    lines.append(
        f"  {figures['ran_again_after_failure']} jobs run again after a failure, "
        f"{figures['strays_deleted']} stray Jobs deleted (both 0 when nothing fails)"
    )
    lines.append(
        "  CPU per job by process: "
        + ", ".join(f"{role} {ms} ms" for role, ms in figures["cpu_ms_per_job"].items())
        + " (kubesim includes its start and cluster set-up)"
    )
    before, after = figures["reference_ms"]
    lines.append(
        f"  this machine's reference loop: {before} ms before the run, {after} ms after "
        "(compare runs only at like figures)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
