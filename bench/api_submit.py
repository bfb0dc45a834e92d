"""Submission throughput of the API: 16 clients submit jobs and read /api/v1/me/ for 30 s.

Serves the portal on PostgreSQL (a fresh database `portal_bench` per server), creates one user
and API token per client, then each client alternates POST /api/v1/jobs/ and GET /api/v1/me/.
Prints submissions/s and p50/p99 latency of both for each server, side by side, and the CPU
each submit + `/me/` pair cost the server's processes and PostgreSQL's (the kernel's accounting
over the run: less noisy than the wall figures on a shared machine):

- gunicorn: the `web` role as the image runs it (deploy/image/entrypoint.sh): `portal.wsgi` in
  `--workers` processes of `--threads` threads each;
- uvicorn: the `ws` role, `portal.asgi` in `--workers` processes, as `web` was served before
  (every synchronous view of a process on its one thread).

    python bench/api_submit.py [--server both|gunicorn|uvicorn] [--clients 16] [--seconds 30]
                               [--workers 2] [--threads 8] [--database portal_bench] [--json]

Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust), as on the development machines.
Everything it talks to is on 127.0.0.1, and the run stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from statistics import quantiles

import aiohttp
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.postgres import ROOT, environment, fresh_database

DATABASE = "portal_bench"
ENTRYPOINT = ROOT / "deploy" / "image" / "entrypoint.sh"
SERVERS = ("gunicorn", "uvicorn")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (0 for one gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_tree(root: int) -> list[int]:
    """`root` and its descendants (the server's workers)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            parents.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def _backends(database: str) -> list[int]:
    """The PostgreSQL sessions of the bench's database (those the server opened)."""
    sql = (
        f"SELECT pid FROM pg_stat_activity WHERE datname = '{database}' AND pid <> pg_backend_pid()"
    )
    out = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", database, "-Atc", sql],
        check=True,
        capture_output=True,
        text=True,
    )
    return [int(word) for word in out.stdout.split()]


def _cpu_snapshot(server: int, database: str) -> dict[str, dict[int, float]]:
    return {
        "server": {pid: _cpu_seconds(pid) for pid in _process_tree(server)},
        "postgres": {pid: _cpu_seconds(pid) for pid in _backends(database)},
    }


def _cpu_used(
    before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]
) -> dict[str, float]:
    """CPU seconds each side used between two snapshots (a process new since counts from 0)."""
    return {
        side: sum(cpu - before[side].get(pid, 0.0) for pid, cpu in after[side].items())
        for side in after
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(database: str) -> dict[str, str]:
    return environment(database, THROTTLE_TOKEN="1000000/min")


def _prepare(clients: int, database: str) -> list[str]:
    """Fresh database, migrated, with a team, a quota, and one user + token per client."""
    fresh_database(database, _env(database))
    manage = [sys.executable, str(ROOT / "manage.py")]
    script = f"""
from decimal import Decimal
from django.contrib.auth.models import User
from quotas.models import GpuType, Queue, Quota
from tenants.models import Membership, Team
from tenants.tokens import issue_token
gpu = GpuType.objects.create(name="h100-80g", product_label="NVIDIA-H100-80GB-HBM3",
                             memory_gb=80, price_per_gpu_hour=Decimal("2.5"))
team = Team.objects.create(slug="bench", name="Bench")
Quota.objects.create(team=team, gpu_type=gpu, guaranteed=64, limit=128)
Queue.objects.create(team=team, name="normal", priority=100, max_runtime=86400)
for i in range({clients}):
    user = User.objects.create_user(f"client{{i}}")
    Membership.objects.create(team=team, user=user)
    print(issue_token(user, "bench")[1])
"""
    out = subprocess.run(
        [*manage, "shell", "-c", script],
        check=True,
        env=_env(database),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return [word for word in out.stdout.split() if word.startswith("gpt_")]


async def _client(
    base: str,
    token: str,
    deadline: float,
    index: int,
    submit_ms: list[float],
    me_ms: list[float],
    errors: list[str],
) -> None:
    # aiohttp rather than httpx: the load generator shares the two cores with the server,
    # so the cheaper client leaves more of them to what is measured.
    headers = {"Authorization": f"Bearer {token}"}
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(base, headers=headers, timeout=timeout) as http:
        n = 0
        while time.monotonic() < deadline:
            body = {
                "name": f"bench-{index}-{n}",
                "image": "python:3.11",
                "command": ["python", "train.py"],
                "gpu_type": "h100-80g",
                "gpus_per_node": 1,
            }
            start = time.perf_counter()
            async with http.post("/api/v1/jobs/", json=body) as response:
                text = await response.text()
            submit_ms.append((time.perf_counter() - start) * 1000)
            if response.status != 201:
                errors.append(f"submit {response.status}: {text[:200]}")
            start = time.perf_counter()
            async with http.get("/api/v1/me/") as response:
                await response.read()
            me_ms.append((time.perf_counter() - start) * 1000)
            if response.status != 200:
                errors.append(f"me {response.status}")
            n += 1


def _pct(values: list[float]) -> tuple[float, float]:
    cuts = quantiles(values, n=100)
    return cuts[49], cuts[98]


async def _run(base: str, tokens: list[str], seconds: float) -> dict[str, float]:
    submit_ms: list[float] = []
    me_ms: list[float] = []
    errors: list[str] = []
    started = time.monotonic()
    await asyncio.gather(
        *(
            _client(base, t, started + seconds, i, submit_ms, me_ms, errors)
            for i, t in enumerate(tokens)
        )
    )
    elapsed = time.monotonic() - started
    if errors:
        raise SystemExit(f"{len(errors)} failed requests, first: {errors[0]}")
    s50, s99 = _pct(submit_ms)
    m50, m99 = _pct(me_ms)
    return {
        "submissions_per_s": len(submit_ms) / elapsed,
        "submit_p50_ms": s50,
        "submit_p99_ms": s99,
        "me_per_s": len(me_ms) / elapsed,
        "me_p50_ms": m50,
        "me_p99_ms": m99,
        "submit_to_me_ratio": len(submit_ms) / len(me_ms),
        "submit_vs_me_p50_ratio": s50 / m50,
        "elapsed_s": elapsed,
    }


def _wait_up(base: str, server: subprocess.Popen[bytes]) -> None:
    for _ in range(100):
        if server.poll() is not None:
            raise SystemExit("the server exited during start-up")
        try:
            httpx.get(f"{base}/healthz", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("the server did not come up")


def _command(server: str) -> list[str]:
    """The role as the image runs it (deploy/image/entrypoint.sh): gunicorn is `web`, uvicorn
    `ws`, which is how `web` was served before."""
    return ["sh", str(ENTRYPOINT), "web" if server == "gunicorn" else "ws"]


def _server_env(port: int, args: argparse.Namespace) -> dict[str, str]:
    return _env(args.database) | {
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_WORKERS": str(args.workers),
        "WEB_THREADS": str(args.threads),
    }


def measure(server: str, args: argparse.Namespace) -> dict[str, float]:
    """One server's figures, on a database of its own."""
    tokens = _prepare(args.clients, args.database)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(_command(server), env=_server_env(port, args), cwd=ROOT)
    try:
        _wait_up(base, process)
        before, client = _cpu_snapshot(process.pid, args.database), time.process_time()
        figures = asyncio.run(_run(base, tokens, args.seconds))
        client = time.process_time() - client
        used = _cpu_used(before, _cpu_snapshot(process.pid, args.database))
        pairs = figures["submissions_per_s"] * figures["elapsed_s"]
        figures["server_cpu_ms_per_pair"] = used["server"] * 1000 / pairs
        figures["postgres_cpu_ms_per_pair"] = used["postgres"] * 1000 / pairs
        figures["client_cpu_ms_per_pair"] = client * 1000 / pairs
        return figures
    finally:
        process.terminate()
        process.wait(timeout=20)


def _print(args: argparse.Namespace, results: dict[str, dict[str, float]]) -> None:
    cores = os.cpu_count()
    print(
        f"{args.clients} clients, {args.seconds:.0f} s, PostgreSQL, {cores} cores, "
        f"{args.workers} processes (gunicorn: {args.threads} threads each)"
    )
    print(
        f"  {'server':<9} {'submit/s':>9} {'p50 ms':>7} {'p99 ms':>7}   "
        f"{'/me/ p50':>8} {'/me/ p99':>8}   CPU ms per submit + /me/: server, PostgreSQL"
    )
    for server, f in results.items():
        print(
            f"  {server:<9} {f['submissions_per_s']:9.1f} {f['submit_p50_ms']:7.1f}"
            f" {f['submit_p99_ms']:7.1f}   {f['me_p50_ms']:8.1f} {f['me_p99_ms']:8.1f}"
            f"   {f['server_cpu_ms_per_pair']:6.2f} {f['postgres_cpu_ms_per_pair']:6.2f}"
        )
    if len(results) == 2:
        rate = results["gunicorn"]["submissions_per_s"] / results["uvicorn"]["submissions_per_s"]
        p99 = results["gunicorn"]["submit_p99_ms"] / results["uvicorn"]["submit_p99_ms"]
        print(f"  gunicorn : uvicorn  submissions/s {rate:.2f}, submit p99 {p99:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["both", *SERVERS], default="both")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument(
        "--database", default=DATABASE, help="its name (dropped and made again for each server)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    servers = SERVERS if args.server == "both" else (args.server,)
    results = {server: measure(server, args) for server in servers}
    if args.json:
        print(json.dumps(results))
    else:
        _print(args, results)


if __name__ == "__main__":
    main()
