"""A 1,000-member sweep accepted in one request, beside single-job submissions.

Serves the portal as bench/api_submit.py does (gunicorn, `--workers` processes of `--threads`
threads, on PostgreSQL, a fresh database of its own), then:

1. one client submits `--sweeps` sweeps of `--members` members each (`POST /api/v1/sweeps/`),
   one after the other: each request's latency (the target: ≤ 1 s for 1,000 members) and the
   jobs a second that makes;
2. bench/api_submit.py's load (`--clients` clients alternating `POST /api/v1/jobs/` and
   `GET /api/v1/me/`) for `--seconds`: single-job submissions a second, on the same server.

Prints both and their ratio (jobs a second through sweeps : through single submissions).

    python bench/sweep_submit.py [--members 1000] [--sweeps 5] [--clients 16] [--seconds 10]
                                 [--workers 2] [--threads 8] [--json]

Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust), as on the development machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import api_submit
from bench.postgres import ROOT

DATABASE = "portal_bench_sweep"


def wsgi() -> Any:
    """The web role's WSGI application, with the sweep routes where portal/urls.py has none
    yet (gunicorn's app factory: `bench.sweep_submit:wsgi()`)."""
    from django.core.wsgi import get_wsgi_application

    application = get_wsgi_application()
    from django.conf import settings
    from django.urls import NoReverseMatch, reverse

    try:
        reverse("sweep-list-api")
    except NoReverseMatch:
        settings.ROOT_URLCONF = __name__
    return application


def __getattr__(name: str) -> Any:
    """`urlpatterns`, built on first use (Django is set up by then): this module as the
    portal's URLconf with the sweep routes added."""
    if name != "urlpatterns":
        raise AttributeError(name)
    from django.urls import include, path

    from jobs import sweeps_api
    from portal.urls import urlpatterns as portal

    return [path("api/v1/", include(sweeps_api.urls)), *portal]


def _sweep_body(index: int, members: int) -> dict[str, Any]:
    return {
        "name": f"sweep-{index}",
        "image": "python:3.11",
        "command": ["python", "train.py", "--shard={index}"],
        "gpu_type": "h100-80g",
        "gpus_per_node": 1,
        "sweep": {"array": members},
    }


def _sweeps(base: str, token: str, count: int, members: int) -> list[float]:
    """Seconds each sweep submission took, one after the other."""
    took = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
        for index in range(count):
            start = time.perf_counter()
            response = http.post("/api/v1/sweeps/", json=_sweep_body(index, members))
            took.append(time.perf_counter() - start)
            if response.status_code != 201 or response.json()["size"] != members:
                raise SystemExit(f"sweep {response.status_code}: {response.text[:300]}")
    return took


def measure(args: argparse.Namespace) -> dict[str, float]:
    tokens = api_submit._prepare(args.clients, DATABASE)
    port = api_submit._free_port()
    base = f"http://127.0.0.1:{port}"
    command = [
        *(sys.executable, "-m", "gunicorn", "bench.sweep_submit:wsgi()"),
        *("--bind", f"127.0.0.1:{port}", "--workers", str(args.workers)),
        *("--worker-class", "gthread", "--threads", str(args.threads), "--log-level", "warning"),
    ]
    process = subprocess.Popen(command, env=api_submit._env(DATABASE), cwd=ROOT)
    try:
        api_submit._wait_up(base, process)
        _sweeps(base, tokens[0], 1, args.members)  # warm-up: each worker's first request
        took = _sweeps(base, tokens[0], args.sweeps, args.members)
        single = asyncio.run(api_submit._run(base, tokens, args.seconds))
    finally:
        process.terminate()
        process.wait(timeout=20)
    sweep_rate = args.members / median(took)
    return {
        "members": args.members,
        "sweep_p50_s": median(took),
        "sweep_max_s": max(took),
        "sweep_jobs_per_s": sweep_rate,
        "single_submissions_per_s": single["submissions_per_s"],
        "single_submit_p50_ms": single["submit_p50_ms"],
        "sweep_to_single_ratio": sweep_rate / single["submissions_per_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args)
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"PostgreSQL, {os.cpu_count()} cores, gunicorn {args.workers}×{args.threads}; "
        f"{args.sweeps} sweeps of {args.members}, then {args.clients} clients for "
        f"{args.seconds:.0f} s"
    )
    print(
        f"  one sweep of {figures['members']}: p50 {figures['sweep_p50_s']:.3f} s, "
        f"max {figures['sweep_max_s']:.3f} s (target ≤ 1 s) = "
        f"{figures['sweep_jobs_per_s']:.0f} jobs/s"
    )
    print(
        f"  single jobs: {figures['single_submissions_per_s']:.1f} submissions/s "
        f"(p50 {figures['single_submit_p50_ms']:.1f} ms)"
    )
    print(f"  sweep : single jobs/s {figures['sweep_to_single_ratio']:.1f}")


if __name__ == "__main__":
    main()
