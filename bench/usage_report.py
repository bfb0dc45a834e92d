"""Usage reports on a year of a large cluster: a month's statements and `/api/v1/usage/`.

Loads 1,000,000 usage segments (COPY, then their daily roll-up) of 100 teams in 10 departments
over the 12 months before the current one into a PostgreSQL database of its own
(`usage_bench_<pid>`, dropped at the end), then measures, for the last of those months:

- `billing.statements.team_statements` for every team and department (110 statements, live
  drafts: nothing finalised), as the statements page and API work them out;
- `GET /api/v1/usage/?period=YYYY-MM&group_by=team,gpu_type` as an admin, served by gunicorn
  as the `web` role runs it (deploy/image/entrypoint.sh), from 8 client threads (httpx) for a
  bounded number of requests each; p50 and p99.

Prints each figure beside its goal (statements <= 1 s; usage p99 <= 300 ms with 8 clients).

    python bench/usage_report.py [--segments 1000000] [--requests 25] [--json] [--keep]

With `--keep` the database stays (its name is printed) for EXPLAIN and profiling.

Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust; BENCH_DATABASE_URL overrides).
Everything it talks to is on 127.0.0.1, and the run stops by itself. The segments are closed
runs of 2,000 jobs (500 runs each: what the fold reads is the segments, not the jobs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from statistics import median, quantiles
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.api_submit import _free_port, _wait_up
from bench.postgres import ROOT, fresh_database, use_environment

DATABASE = f"usage_bench_{os.getpid()}"
DEPARTMENTS, TEAMS_PER_DEPARTMENT, USERS_PER_TEAM, JOBS_PER_TEAM = 10, 10, 5, 20
GPU_TYPES = (
    ("h100-80g", "NVIDIA-H100-80GB-HBM3", Decimal("2.50")),
    ("a100-80g", "NVIDIA-A100-SXM4-80GB", Decimal("1.40")),
)
QUEUES = (("normal", 100, False), ("low", 50, True))
CLIENTS = 8
GOALS = {"statements_s": 1.0, "usage_p99_ms": 300.0}
COLUMNS = (
    "team_id, job_id, user_id, queue_id, gpu_type_id, gpus, attempt, started_at, ended_at, "
    "end_state, end_reason, gpu_seconds, credited, credit_reason"
)


def _months(now: datetime) -> tuple[datetime, datetime, str]:
    """The 12 months before the current one: (first day, end, the last month's "YYYY-MM")."""
    end = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    year, month = divmod(end.year * 12 + end.month - 1 - 12, 12)
    last = (end - timedelta(days=1)).strftime("%Y-%m")
    return datetime(year, month + 1, 1, tzinfo=UTC), end, last


def _setup() -> tuple[list[dict[str, Any]], str]:
    """Departments, teams, users, queues, jobs; an admin and their token. Returns each job's
    ids (for the segments) and the token."""
    from django.contrib.auth.models import User

    from billing.models import QueueMultiplier
    from jobs.models import Job, State
    from quotas.models import GpuType, Queue
    from tenants.models import Membership, Team
    from tenants.tokens import issue_token

    types = [
        GpuType.objects.create(
            name=name, product_label=label, memory_gb=80, price_per_gpu_hour=price
        )
        for name, label, price in GPU_TYPES
    ]
    admin = User.objects.create_superuser("admin", "admin@example.org", "bench")
    jobs = []
    for d in range(DEPARTMENTS):
        department = Team.objects.create(slug=f"dept-{d}", name=f"Department {d}")
        for t in range(TEAMS_PER_DEPARTMENT):
            slug = f"team-{d * TEAMS_PER_DEPARTMENT + t}"
            team = Team.objects.create(slug=slug, name=slug, parent=department)
            users = [User.objects.create_user(f"{slug}-u{u}") for u in range(USERS_PER_TEAM)]
            Membership.unscoped.bulk_create([Membership(team=team, user=u) for u in users])
            queues = [
                Queue.objects.create(
                    team=team, name=n, priority=p, preemptible=pre, max_runtime=172800
                )
                for n, p, pre in QUEUES
            ]
            QueueMultiplier.objects.create(team=team, queue=queues[1], multiplier=Decimal("0.5"))
            for j in range(JOBS_PER_TEAM):
                user, queue, gpu = users[j % USERS_PER_TEAM], queues[j % 2], types[j % 2]
                job = Job.objects.create(
                    team=team,
                    owner=user,
                    queue=queue,
                    gpu_type=gpu,
                    name=f"job-{j}",
                    image="python:3.11",
                    gpus_per_node=1,
                    cpu=Decimal(4),
                    memory="16Gi",
                    max_runtime=172800,
                    state=State.SUCCEEDED,
                )
                ids = (team.pk, job.pk, user.pk, queue.pk, gpu.pk)
                jobs.append(dict(zip(("team", "job", "user", "queue", "gpu"), ids, strict=True)))
    return jobs, issue_token(admin, "bench")[1]


def _segments(jobs: list[dict[str, Any]], count: int, start: datetime, end: datetime) -> Any:
    """`count` closed segments spread over [start, end), 5 min to 2 days on 1 to 8 GPUs, in
    the order they started (as the jobs' admissions write them)."""
    rng = random.Random(42)
    span = (end - start).total_seconds()
    for n in range(count):
        job = jobs[n % len(jobs)]
        seconds = min(172800, int(rng.lognormvariate(8.5, 1.2)) + 300)
        began = start + timedelta(seconds=min(span * (n + rng.random()) / count, span - seconds))
        gpus = rng.choice((1, 1, 1, 2, 4, 8))
        credited = rng.random() < 0.02
        yield (
            job["team"],
            job["job"],
            job["user"],
            job["queue"],
            job["gpu"],
            gpus,
            n // len(jobs) + 1,
            began,
            began + timedelta(seconds=seconds),
            "node_failed" if credited else "succeeded",
            "",
            gpus * seconds,
            credited,
            "node_lost" if credited else "",
        )


def _load(jobs: list[dict[str, Any]], count: int, start: datetime, end: datetime) -> float:
    """COPY the segments in, then roll them up by day as their closing would have."""
    from django.db import connection, transaction

    from billing.models import UsageSegment
    from billing.rollup import add_to_days

    began = time.perf_counter()
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY billing_usagesegment ({COLUMNS}) FROM STDIN") as copy:
            for row in _segments(jobs, count, start, end):
                copy.write_row(row)
        with transaction.atomic():
            add_to_days(UsageSegment.unscoped.order_by().iterator(chunk_size=10_000))
        cursor.execute("ANALYZE billing_usagesegment")
        cursor.execute("ANALYZE billing_usageday")
    return time.perf_counter() - began


def _time_statements(month: str, runs: int = 5) -> list[float]:
    from billing.statements import team_statements
    from billing.usage import month_period
    from tenants.models import Team

    teams, period, took = list(Team.objects.all()), month_period(month), []
    for _ in range(runs):
        began = time.perf_counter()
        shown = team_statements(teams, period)
        took.append(time.perf_counter() - began)
    assert len(shown) == len(teams) and all(s.figures.cost > 0 for s in shown)
    return took


def _clients(base: str, token: str, month: str, requests: int) -> list[float]:
    """8 threads, `requests` each: the latencies in ms (a failed request ends the bench)."""
    latencies: list[float] = []
    errors: list[str] = []
    params = {"period": month, "group_by": "team,gpu_type"}

    def client() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
            for _ in range(requests):
                began = time.perf_counter()
                response = http.get("/api/v1/usage/", params=params)
                latencies.append((time.perf_counter() - began) * 1000)
                if response.status_code != 200 or len(response.json()["rows"]) != 200:
                    errors.append(f"{response.status_code}: {response.text[:200]}")

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"{len(errors)} failed requests, first: {errors[0]}")
    return latencies


def _serve(token: str, month: str, requests: int) -> list[float]:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = os.environ | {
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "THROTTLE_TOKEN": "1000000/min",
    }
    entrypoint = ROOT / "deploy" / "image" / "entrypoint.sh"
    server = subprocess.Popen(["sh", str(entrypoint), "web"], env=env, cwd=ROOT)
    try:
        _wait_up(base, server)
        _clients(base, token, month, 1)  # each worker's first request: imports, connections
        return _clients(base, token, month, requests)
    finally:
        server.terminate()
        server.wait(timeout=20)


def _drop() -> None:
    from django.db import connections

    connections.close_all()
    sql = f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c", sql], check=True)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import django

    use_environment(DATABASE)
    try:
        fresh_database(DATABASE)
        django.setup()
        start, end, month = _months(datetime.now(UTC))
        jobs, token = _setup()
        load_s = _load(jobs, args.segments, start, end)
        statements = _time_statements(month)
        latencies = _serve(token, month, args.requests)
    finally:
        if args.keep:
            print(f"kept database {DATABASE}", file=sys.stderr)
        else:
            _drop()
    cuts = quantiles(latencies, n=100)
    return {
        "segments": args.segments,
        "month": month,
        "load_s": load_s,
        "statements_s": median(statements),
        "statements_max_s": max(statements),
        "usage_requests": len(latencies),
        "usage_p50_ms": cuts[49],
        "usage_p99_ms": cuts[98],
        "cores": os.cpu_count(),
    }


def _print(f: dict[str, Any]) -> None:
    print(
        f"{f['segments']:,} segments, 100 teams in 10 departments, 12 months (loaded in "
        f"{f['load_s']:.1f} s); month {f['month']}; PostgreSQL, {f['cores']} cores"
    )
    print(
        f"  statements, all 110 teams (median of 5)  {f['statements_s']:7.3f} s"
        f"   (max {f['statements_max_s']:.3f} s)   goal <= {GOALS['statements_s']:.0f} s"
    )
    print(
        f"  /api/v1/usage/ team,gpu_type, {CLIENTS} clients  p50 {f['usage_p50_ms']:6.1f} ms"
        f"   p99 {f['usage_p99_ms']:6.1f} ms   goal p99 <= {GOALS['usage_p99_ms']:.0f} ms"
        f"   ({f['usage_requests']} requests)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=25, help="per client")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()
    figures = measure(args)
    if args.json:
        print(json.dumps({**figures, "goals": GOALS}))
    else:
        _print(figures)


if __name__ == "__main__":
    main()
