"""Live fan-out: agents post GPU samples, browsers on websockets receive metrics and log lines.

One web process (uvicorn) on PostgreSQL (a fresh database `portal_live_bench`) and the Redis
channel layer. 100 simulated nodes × 8 GPUs post every second; 200 running jobs (2 per node);
1,000 websocket clients, 5 per job; a stand-in controller persists log chunks of 40 jobs and
publishes them (`jobs.streams.publish_log_chunk`). Prints ingested samples/s, delivered
messages/s, p50/p99 latency from the agent's reading to the browser's receipt, drops, and the web
process's CPU use.

    python bench/live_fanout.py [--seconds 30] [--nodes 100] [--clients 1000]
    python bench/live_fanout.py --no-clients [--samples-per-post 8] [--concurrency 16]

`--no-clients` posts as fast as the web process accepts (closed loop) to find its ingestion rate.
Needs PostgreSQL (postgres@127.0.0.1:5432, trust) and Redis (127.0.0.1:6379); everything is on
127.0.0.1 and the run stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from statistics import quantiles
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
DATABASE = "portal_live_bench"
GPUS = 8
JOBS_PER_NODE = 2
LOGGING_JOBS = 40
LOG_EVERY_S = 0.5
LINES_PER_CHUNK = 5


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env() -> dict[str, str]:
    prefix = f"bench{os.getpid()}"
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DATABASE}",
        "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/3"),
        "CHANNEL_PREFIX": prefix,
        "CACHE_KEY_PREFIX": prefix,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "LOG_LEVEL": "WARNING",
        "DEBUG": "0",
        "DB_POOL_SIZE": "16",
    }


def _fresh_database() -> None:
    psql = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c"]
    subprocess.run([*psql, f"DROP DATABASE IF EXISTS {DATABASE}"], check=True)
    subprocess.run([*psql, f"CREATE DATABASE {DATABASE}"], check=True)


def _setup_django() -> None:
    os.environ.update(_env())
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _world(nodes: int) -> dict[str, Any]:
    """Nodes with tokens, two running jobs on each, and one signed-in member per team."""
    from decimal import Decimal

    from django.contrib.auth.models import User
    from django.test import Client

    from cluster.models import Node
    from jobs.models import Job, State
    from monitoring.tokens import rotate_node_token
    from quotas.models import GpuType, Queue
    from tenants.models import Membership, Role, Team

    gpu = GpuType.objects.create(
        name="h100-80g",
        product_label="NVIDIA-H100-80GB-HBM3",
        memory_gb=80,
        gpus_per_node=8,
        price_per_gpu_hour=Decimal("2.5"),
    )
    teams, cookies = [], []
    for t in range(10):
        team = Team.objects.create(slug=f"team{t}", name=f"Team {t}")
        queue = Queue.objects.create(team=team, name="normal", priority=100, max_runtime=86400)
        user = User.objects.create_user(f"user{t}", password=None)
        Membership.objects.create(team=team, user=user, role=Role.MEMBER)
        client = Client()
        client.force_login(user)
        teams.append((team, queue, user))
        cookies.append(client.cookies["sessionid"].value)
    tokens, jobs = {}, []
    for n in range(nodes):
        node = Node.objects.create(
            name=f"node-{n:03d}", gpu_type=gpu, gpu_capacity=GPUS, ready=True
        )
        tokens[node.name] = rotate_node_token(node)
        for j in range(JOBS_PER_NODE):
            t = (n * JOBS_PER_NODE + j) % len(teams)
            team, queue, user = teams[t]
            job = Job.unscoped.create(
                team=team,
                owner=user,
                queue=queue,
                gpu_type=gpu,
                name=f"job-{n}-{j}",
                image="bench",
                gpus_per_node=GPUS // JOBS_PER_NODE,
                cpu=1,
                memory="1Gi",
                max_runtime=86400,
                state=State.RUNNING,
                placement={node.name: GPUS // JOBS_PER_NODE},
            )
            jobs.append((job.pk, t))
    return {"tokens": tokens, "jobs": jobs, "cookies": cookies}


# --- the web process ------------------------------------------------------------------------
def _serve(port: int) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "portal.asgi:application",
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    server = subprocess.Popen(command, cwd=ROOT, env=_env())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.2)
    server.kill()
    raise SystemExit("uvicorn did not start")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- agents -----------------------------------------------------------------------------------
def _batch(node: str, samples: int, now: float) -> dict[str, Any]:
    gpus = []
    for s in range(samples):
        index = s % GPUS
        at = now - (samples - 1 - s) // GPUS * 5  # older samples of a backlog, 5 s apart
        gpus.append(
            {
                "index": index,
                "at": at,
                "DCGM_FI_DEV_GPU_UTIL": 70 + index,
                "DCGM_FI_DEV_FB_USED": 40000.0,
                "DCGM_FI_DEV_FB_FREE": 41559.0,
                "DCGM_FI_DEV_FB_TOTAL": 81559,
                "DCGM_FI_DEV_GPU_TEMP": 60,
                "DCGM_FI_DEV_POWER_USAGE": 500.0,
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": int(now * 5e5),
            }
        )
    return {"node": node, "interval": 1, "gpus": gpus, "xids": []}


async def _post(
    session: aiohttp.ClientSession,
    url: str,
    node: str,
    token: str,
    samples: int,
    latencies: list[float],
) -> int:
    started = time.time()
    headers = {"Authorization": f"Bearer {token}"}
    async with session.post(url, json=_batch(node, samples, started), headers=headers) as reply:
        if reply.status != 202:
            raise SystemExit(f"{node}: HTTP {reply.status} {await reply.text()}")
    latencies.append(time.time() - started)
    return samples


async def _agent(
    session: aiohttp.ClientSession,
    url: str,
    node: str,
    token: str,
    until: float,
    stats: dict[str, Any],
) -> None:
    """One node posting every second, like the agent at --interval 1, at its own phase (agents
    start at different moments; in step they would post in bursts)."""
    next_at = time.time() + random.random()
    while next_at < until:
        await asyncio.sleep(max(0.0, next_at - time.time()))
        # Await first, then add: `x += await f()` reads x before the await and loses updates.
        sent = await _post(session, url, node, token, GPUS, stats["post_s"])
        stats["samples"] += sent
        stats["posts"][node] = stats["posts"].get(node, 0) + 1
        next_at += 1.0


async def _flood(
    session: aiohttp.ClientSession,
    url: str,
    tokens: dict[str, str],
    until: float,
    samples: int,
    stats: dict[str, Any],
    worker: int,
    workers: int,
) -> None:
    """Post back to back (a node catching up, or many nodes): the ingestion ceiling."""
    nodes = list(tokens)[worker::workers]
    i = 0
    while time.time() < until:
        node = nodes[i % len(nodes)]
        sent = await _post(session, url, node, tokens[node], samples, stats["post_s"])
        stats["samples"] += sent
        i += 1


async def _agents(
    port: int,
    world: dict[str, Any],
    seconds: float,
    args: argparse.Namespace,
    stats: dict[str, Any],
) -> None:
    url = f"http://127.0.0.1:{port}/api/v1/agent/samples/"
    connector = aiohttp.TCPConnector(limit=200)
    async with aiohttp.ClientSession(connector=connector) as session:
        # One post per node first, unmeasured: it fills the token, GPU and placement caches.
        for node, token in world["tokens"].items():
            await _post(session, url, node, token, GPUS, [])
        until = time.time() + seconds
        if args.no_clients:
            workers = args.concurrency
            tasks = [
                _flood(
                    session, url, world["tokens"], until, args.samples_per_post, stats, w, workers
                )
                for w in range(workers)
            ]
        else:
            tasks = [
                _agent(session, url, node, token, until, stats)
                for node, token in world["tokens"].items()
            ]
        await asyncio.gather(*tasks)


# --- the controller's log followers -----------------------------------------------------------
def _logs(jobs: list[tuple[int, int]], until: float, stats: dict[str, Any]) -> None:
    from django.db import close_old_connections

    from cluster.models import JobLogChunk
    from jobs.models import Job
    from jobs.streams import publish_log_chunk

    logging = [Job.unscoped.get(pk=pk) for pk, _ in jobs[:LOGGING_JOBS]]
    seq = 0
    while time.time() < until:
        seq += 1
        for job in logging:
            now = time.time()
            lines = [
                f"{now:.6f} line {(seq - 1) * LINES_PER_CHUNK + i + 1}"
                for i in range(LINES_PER_CHUNK)
            ]
            chunk = JobLogChunk.objects.create(
                team_id=job.team_id,
                job=job,
                pod="train-0",
                seq=seq,
                first_line=(seq - 1) * LINES_PER_CHUNK + 1,
                line_count=LINES_PER_CHUNK,
                text="\n".join(lines),
            )
            publish_log_chunk(chunk)
            stats["lines"] += LINES_PER_CHUNK
        time.sleep(max(0.0, LOG_EVERY_S - (time.time() - now)))
    close_old_connections()


# --- browsers (their own process, so their CPU is not the bench's event loop's) -------------
async def _browser(
    session: aiohttp.ClientSession,
    url: str,
    cookie: str,
    origin: str,
    done: asyncio.Event,
    ready: asyncio.Event,
    result: dict[str, Any],
) -> None:
    headers = {"Cookie": f"sessionid={cookie}", "Origin": origin}
    async with session.ws_connect(url, headers=headers, heartbeat=None) as socket_:
        result["connected"] += 1
        ready.set()
        next_line = 1
        while not done.is_set():
            try:
                frame = await socket_.receive(timeout=0.5)
            except TimeoutError:
                continue
            if frame.type != aiohttp.WSMsgType.TEXT:
                result["closed"] += 1  # the server closed it (e.g. a missed ping under load)
                break
            message = json.loads(frame.data)
            now = time.time()
            if message["type"] == "job.metrics":
                result["metrics"] += 1
                result["latency"].extend(now - g["at"] for g in message["gpus"][:1])
            elif message["type"] == "job.log":
                if message["first_line"] != next_line:
                    result["log_gaps"] += 1
                next_line = message["first_line"] + len(message["lines"])
                result["lines"] += len(message["lines"])
                result["log_latency"].append(now - float(message["lines"][0].split()[0]))


async def _browsers(
    port: int, targets: list[tuple[int, str]], connected: Any, stop: Any
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "connected": 0,
        "closed": 0,
        "metrics": 0,
        "lines": 0,
        "log_gaps": 0,
        "latency": [],
        "log_latency": [],
    }
    origin = f"http://127.0.0.1:{port}"
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        tasks = []
        done = asyncio.Event()
        for job_id, cookie in targets:
            ready = asyncio.Event()
            url = f"ws://127.0.0.1:{port}/ws/jobs/{job_id}/?after=0"
            tasks.append(
                asyncio.create_task(_browser(session, url, cookie, origin, done, ready, result))
            )
            await asyncio.wait_for(ready.wait(), 30)  # one at a time: a refusal shows at once
        connected.set()
        while not stop.is_set():
            await asyncio.sleep(0.2)
        done.set()
        errors = [r for r in await asyncio.gather(*tasks, return_exceptions=True) if r]
        result["errors"] = [repr(e) for e in errors[:3]]
    return result


def _browser_process(
    port: int, targets: list[tuple[int, str]], connected: Any, stop: Any, out: Any
) -> None:
    out.put(asyncio.run(_browsers(port, targets, connected, stop)))


# --- the run ----------------------------------------------------------------------------------
def _percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return quantiles(values, n=100)[q - 1]


def _report(
    args: argparse.Namespace,
    stats: dict[str, Any],
    browsers: dict[str, Any] | None,
    cpu: float,
    load: tuple[float, float, float],
) -> None:
    seconds = args.seconds
    print(
        f"web process: one uvicorn, PostgreSQL + Redis; CPU {100 * cpu / seconds:.0f}% of a "
        f"core; load average before/after {load[0]:.2f}/{os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} cores"
    )
    print(
        f"ingested: {stats['samples'] / seconds:,.0f} GPU samples/s "
        f"({args.samples_per_post if args.no_clients else GPUS} per post); post p50 "
        f"{1000 * _percentile(stats['post_s'], 50):.1f} ms, p99 "
        f"{1000 * _percentile(stats['post_s'], 99):.1f} ms"
    )
    if browsers is None:
        return
    posts = sum(stats["posts"].values())
    clients_per_job = args.clients / (args.nodes * JOBS_PER_NODE)
    expected = posts * JOBS_PER_NODE * clients_per_job
    delivered = browsers["metrics"] + browsers["lines"] / LINES_PER_CHUNK
    print(
        f"clients connected: {browsers['connected']} of {args.clients}; "
        f"closed by the server during the run: {browsers['closed']}"
    )
    print(
        f"delivered: {delivered / seconds:,.0f} messages/s "
        f"({browsers['metrics'] / seconds:,.0f} metrics, "
        f"{browsers['lines'] / LINES_PER_CHUNK / seconds:,.0f} log chunks)"
    )
    print(
        f"metrics latency (agent reading → browser): p50 "
        f"{1000 * _percentile(browsers['latency'], 50):.0f} ms, p99 "
        f"{1000 * _percentile(browsers['latency'], 99):.0f} ms"
    )
    print(
        f"log latency (line written → browser): p50 "
        f"{1000 * _percentile(browsers['log_latency'], 50):.0f} ms, p99 "
        f"{1000 * _percentile(browsers['log_latency'], 99):.0f} ms"
    )
    dropped = max(0, int(expected - browsers["metrics"]))
    print(
        f"metric messages dropped or superseded: {dropped} of {int(expected)} "
        f"({100 * dropped / max(1, expected):.2f}%)"
    )
    expected_lines = int(stats["lines"] * clients_per_job)
    print(
        f"log lines: {browsers['lines']} received of {expected_lines} (written × subscribers);"
        f" gaps seen by a browser: {browsers['log_gaps']}; errors: {browsers['errors']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--no-clients", action="store_true")
    parser.add_argument("--samples-per-post", type=int, default=GPUS)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    _fresh_database()
    _setup_django()
    world = _world(args.nodes)
    port = _free_port()
    server = _serve(port)
    stats: dict[str, Any] = {"samples": 0, "posts": {}, "post_s": [], "lines": 0}
    browsers = None
    spawn = multiprocessing.get_context("spawn")
    out, connected, stop = spawn.Queue(), spawn.Event(), spawn.Event()
    try:
        browser_proc = None
        if not args.no_clients:
            jobs = world["jobs"]
            targets = [
                (jobs[i % len(jobs)][0], world["cookies"][jobs[i % len(jobs)][1]])
                for i in range(args.clients)
            ]
            browser_proc = spawn.Process(
                target=_browser_process, args=(port, targets, connected, stop, out)
            )
            browser_proc.start()
            started = time.monotonic()
            if not connected.wait(timeout=300):  # every browser connected before agents start
                raise SystemExit("the browsers did not all connect within 300 s")
            print(f"{args.clients} browsers connected in {time.monotonic() - started:.1f} s")
        load = os.getloadavg()
        cpu_before = _cpu_seconds(server.pid)
        log_thread = None
        if not args.no_clients:
            log_thread = threading.Thread(
                target=_logs, args=(world["jobs"], time.time() + args.seconds, stats)
            )
            log_thread.start()
        asyncio.run(_agents(port, world, args.seconds, args, stats))
        cpu = _cpu_seconds(server.pid) - cpu_before
        if log_thread is not None:
            log_thread.join()
        if browser_proc is not None:
            time.sleep(3)  # let the last messages arrive
            stop.set()
            browsers = out.get(timeout=120)
            browser_proc.join(timeout=30)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # open websockets can hold a graceful stop
            server.kill()
            server.wait()
    _report(args, stats, browsers, cpu, load)


if __name__ == "__main__":
    main()
