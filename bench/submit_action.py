"""The submit action alone: several processes submit jobs through `jobs.actions.submit_job`.

No web stack in between (`bench/api_submit.py` measures that): each process submits `--jobs` jobs
one after another to its own team, as a web worker would, and they all write the one audit
chain, whose head every submission locks until it commits. Prints each process's wall and CPU
time per submission and the submissions per second of all of them together.

    python bench/submit_action.py [--processes 2] [--jobs 1500] [--json]

Needs PostgreSQL on 127.0.0.1:5432 (BENCH_DATABASE_URL overrides; a fresh database
`portal_submit_bench`); everything stays on 127.0.0.1 and the run stops by itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.postgres import fresh_database, use_environment

DATABASE = "portal_submit_bench"
WARM_UP = 50


def _setup(processes: int) -> None:
    from django.contrib.auth.models import User

    from quotas.models import GpuType, Queue, Quota
    from tenants.models import Membership, Team

    gpu = GpuType.objects.create(name="unit", product_label="BENCH", memory_gb=80, gpus_per_node=8)
    user = User.objects.create_user("bench")
    for t in range(processes):
        team = Team.objects.create(slug=f"team-{t}", name=f"Team {t}")
        Membership.objects.create(team=team, user=user)
        Quota.objects.create(team=team, gpu_type=gpu, guaranteed=8, limit=64)
        Queue.objects.create(team=team, name="normal", priority=100, max_runtime=3600)


def submitter(part: int, jobs: int) -> dict[str, float]:
    """One process: `jobs` submissions to its own team, timed after a warm-up."""
    import django

    django.setup()
    from django.contrib.auth.models import User

    from jobs.actions import submit_job
    from jobs.spec import parse_spec
    from tenants.models import Team

    user, team = User.objects.get(username="bench"), Team.objects.get(slug=f"team-{part}")
    spec = parse_spec(
        {
            "name": "bench",
            "image": "bench:1",
            "command": ["run"],
            "gpu_type": "unit",
            "gpus_per_node": 1,
        }
    )
    for _ in range(WARM_UP):
        submit_job(team, spec, acting_user=user)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(jobs):
        submit_job(team, spec, acting_user=user)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall_ms": 1000 * wall / jobs, "cpu_ms": 1000 * cpu / jobs, "seconds": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1500, help="submissions per process")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--part", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_environment(DATABASE, DB_POOL_SIZE="1")
    if args.part is not None:
        print(json.dumps(submitter(args.part, args.jobs)))
        return
    fresh_database(DATABASE)
    import django

    django.setup()
    _setup(args.processes)
    command = [sys.executable, __file__, "--jobs", str(args.jobs), "--part"]
    runs = [
        subprocess.Popen([*command, str(part)], stdout=subprocess.PIPE, text=True)
        for part in range(args.processes)
    ]
    outputs = [run.communicate()[0] for run in runs]
    if any(run.returncode for run in runs):
        raise SystemExit("a submitting process failed; see its traceback above")
    results = [json.loads(output) for output in outputs]
    figures = {
        "processes": args.processes,
        "wall_ms_per_submission": round(median(r["wall_ms"] for r in results), 3),
        "cpu_ms_per_submission": round(median(r["cpu_ms"] for r in results), 3),
        "submissions_per_s": round(
            args.processes * args.jobs / max(r["seconds"] for r in results), 1
        ),
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"{args.processes} processes × {args.jobs} submissions: "
            f"{figures['wall_ms_per_submission']} ms each (median of the processes), "
            f"{figures['cpu_ms_per_submission']} ms of the submitter's CPU, "
            f"{figures['submissions_per_s']} submissions/s together"
        )


if __name__ == "__main__":
    main()
