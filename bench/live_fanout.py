"""Live fan-out: agents post GPU samples, browsers on websockets receive metrics and log lines.

One web process (uvicorn) on PostgreSQL (a fresh database `portal_live_bench`) and the Redis
channel layer. 100 simulated nodes × 8 GPUs post every second; 200 running jobs (2 per node);
1,000 websocket clients, 5 per job; a stand-in for the controller's log writer stores a chunk of
5 lines for each of 40 jobs every half second and publishes them. Prints ingested samples/s,
delivered messages/s, p50/p99 latency from the agent's reading to the browser's receipt, drops,
and the CPU of every party: the web process, PostgreSQL, Redis, and the load generators, each in
its own process (agents: a lean HTTP/1.1 client; browsers: aiohttp websockets; log writer).

    python bench/live_fanout.py [--seconds 30] [--nodes 100] [--clients 1000]
    python bench/live_fanout.py --no-clients [--catch-up 2000] [--concurrency 64]

`--no-clients` posts as fast as the web process accepts (closed loop, `--concurrency`
connections) to find its ingestion rate, first with live posts (8 samples: one node's second),
then with catch-up posts (`--catch-up` samples: an agent sending its backlog), and prints both.
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
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path
from statistics import quantiles
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
SAMPLES_PATH = "/api/v1/agent/samples/"
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
    # The bench's processes share one prefix: the first one's pid.
    prefix = os.environ.setdefault("LIVE_BENCH_PREFIX", f"bench{os.getpid()}")
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


def _setup_django(migrate: bool = True) -> None:
    os.environ.update(_env())
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    if migrate:
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


# --- agents (their own process: a lean HTTP/1.1 client, so the load costs little CPU) -------
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


class _Connection:
    """One keep-alive HTTP/1.1 connection to the web process, posting JSON batches."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, token: str, body: bytes) -> int:
        if self.streams is None:
            self.streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self.streams
        writer.write(
            (
                f"POST {SAMPLES_PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                f"content-type: application/json\r\nauthorization: Bearer {token}\r\n"
                f"content-length: {len(body)}\r\n\r\n"
            ).encode()
            + body
        )
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
        reply = await reader.readexactly(length)
        status = int(head.split(" ", 2)[1])
        if status != 202:
            raise SystemExit(f"HTTP {status} {reply[:300]!r}")
        return status


class _Bodies:
    """A node's post body, renewed each second (a big backlog costs the client milliseconds to
    encode; its readings need only stay within the portal's 6 hours)."""

    def __init__(self, samples: int) -> None:
        self.samples = samples
        self.made: dict[str, tuple[float, bytes]] = {}

    def body(self, node: str, now: float) -> bytes:
        made = self.made.get(node)
        if self.samples == GPUS or made is None or now - made[0] > 1:
            made = self.made[node] = (now, json.dumps(_batch(node, self.samples, now)).encode())
        return made[1]


async def _agent(port: int, node: str, token: str, until: float, stats: dict[str, Any]) -> None:
    """One node posting every second, like the agent at --interval 1, at its own phase (agents
    start at different moments; in step they would post in bursts)."""
    connection, bodies = _Connection(port), _Bodies(GPUS)
    next_at = time.time() + random.random()
    while next_at < until:
        await asyncio.sleep(max(0.0, next_at - time.time()))
        started = time.time()
        await connection.post(token, bodies.body(node, started))
        stats["post_s"].append(time.time() - started)
        stats["samples"] += GPUS
        stats["posts"] += 1
        next_at += 1.0


async def _flood(
    port: int, tokens: list[tuple[str, str]], until: float, samples: int, stats: dict[str, Any]
) -> None:
    """Post back to back (nodes catching up, or many nodes): the ingestion ceiling."""
    connection, bodies = _Connection(port), _Bodies(samples)
    i = 0
    while (started := time.time()) < until:
        node, token = tokens[i % len(tokens)]
        await connection.post(token, bodies.body(node, started))
        stats["post_s"].append(time.time() - started)
        stats["samples"] += samples
        stats["posts"] += 1
        i += 1


async def _agents(
    port: int, tokens: dict[str, str], seconds: float, flood: Any, since: Any
) -> dict[str, Any]:
    stats: dict[str, Any] = {"samples": 0, "posts": 0, "post_s": []}
    # One post per node first, unmeasured: it fills the token, GPU and placement caches.
    warm = _Connection(port)
    for node, token in tokens.items():
        await warm.post(token, json.dumps(_batch(node, GPUS, time.time())).encode())
    since.value = time.time()
    until = since.value + seconds
    cpu = _own_cpu_seconds()
    if flood is None:
        tasks = [_agent(port, node, token, until, stats) for node, token in tokens.items()]
    else:
        samples, workers = flood
        pairs = list(tokens.items())
        tasks = [_flood(port, pairs[w::workers], until, samples, stats) for w in range(workers)]
    await asyncio.gather(*tasks)
    stats["cpu_s"] = _own_cpu_seconds() - cpu
    return stats


def _agent_process(
    port: int, tokens: dict[str, str], seconds: float, flood: Any, since: Any, out: Any
) -> None:
    out.put(asyncio.run(_agents(port, tokens, seconds, flood, since)))


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- the controller's log followers -----------------------------------------------------------
def _logs(jobs: list[int], seconds: float, since: Any, out: Any) -> None:
    """A stand-in for the controller's log writer (its own process): every half second a chunk
    of 5 lines for each of 40 jobs, stored in one INSERT and published in one hop."""
    _setup_django(migrate=False)
    while not since.value:  # the agents' warm-up
        time.sleep(0.05)
    from base.streams import publish_log_chunks
    from cluster.models import JobLogChunk
    from jobs.models import Job

    logging = list(Job.unscoped.filter(pk__in=jobs[:LOGGING_JOBS]))
    cpu, lines, seq = _own_cpu_seconds(), 0, 0
    until = time.time() + seconds
    while (now := time.time()) < until:
        seq += 1
        first = (seq - 1) * LINES_PER_CHUNK + 1
        text = "\n".join(f"{now:.6f} line {first + i}" for i in range(LINES_PER_CHUNK))
        chunks = JobLogChunk.unscoped.bulk_create(
            JobLogChunk(
                team_id=job.team_id,
                job=job,
                pod="train-0",
                seq=seq,
                first_line=first,
                line_count=LINES_PER_CHUNK,
                text=text,
            )
            for job in logging
        )
        publish_log_chunks(chunks)
        lines += LINES_PER_CHUNK * len(chunks)
        time.sleep(max(0.0, LOG_EVERY_S - (time.time() - now)))
    out.put({"lines": lines, "cpu_s": _own_cpu_seconds() - cpu})


# --- browsers (their own process, so their CPU is not the bench's event loop's) -------------
async def _browser(
    session: aiohttp.ClientSession,
    url: str,
    cookie: str,
    origin: str,
    done: asyncio.Event,
    ready: asyncio.Event,
    result: dict[str, Any],
    since: Any,
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
                if since.value and message["gpus"][0]["at"] >= since.value:  # not the warm-up
                    result["metrics"] += 1
                    result["latency"].append(now - message["gpus"][0]["at"])
            elif message["type"] == "job.log":
                if message["first_line"] != next_line:
                    result["log_gaps"] += 1
                next_line = message["first_line"] + len(message["lines"])
                result["lines"] += len(message["lines"])
                result["log_latency"].append(now - float(message["lines"][0].split()[0]))


async def _browsers(
    port: int, targets: list[tuple[int, str]], connected: Any, since: Any, stop: Any
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
            browser = _browser(session, url, cookie, origin, done, ready, result, since)
            tasks.append(asyncio.create_task(browser))
            await asyncio.wait_for(ready.wait(), 30)  # one at a time: a refusal shows at once
        connected.set()
        while not since.value:
            await asyncio.sleep(0.05)
        cpu = _own_cpu_seconds()
        while not stop.is_set():
            await asyncio.sleep(0.2)
        result["cpu_s"] = _own_cpu_seconds() - cpu
        done.set()
        errors = [r for r in await asyncio.gather(*tasks, return_exceptions=True) if r]
        result["errors"] = [repr(e) for e in errors[:3]]
    return result


def _browser_process(
    port: int, targets: list[tuple[int, str]], connected: Any, since: Any, stop: Any, out: Any
) -> None:
    out.put(asyncio.run(_browsers(port, targets, connected, since, stop)))


# --- the run ----------------------------------------------------------------------------------
def _percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return quantiles(values, n=100)[q - 1]


def _services_cpu() -> dict[str, float]:
    """CPU seconds so far of every PostgreSQL and Redis server process on the machine."""
    totals = {"postgres": 0.0, "redis-server": 0.0}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, fields = stat.read_text().split(" (", 1)[1].rsplit(") ", 1)
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if name in totals:
            values = fields.split()
            totals[name] += (int(values[11]) + int(values[12])) / os.sysconf("SC_CLK_TCK")
    return totals


class _Cpu:
    """CPU use over the measured seconds: the web process, PostgreSQL and Redis."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self.web, self.services = _cpu_seconds(server_pid), _services_cpu()

    def stop(self, seconds: float) -> dict[str, float]:
        """{role: percent of one core}."""
        services = _services_cpu()
        used = {
            "web process": _cpu_seconds(self.pid) - self.web,
            "PostgreSQL": services["postgres"] - self.services["postgres"],
            "Redis": services["redis-server"] - self.services["redis-server"],
        }
        return {role: 100 * cpu / seconds for role, cpu in used.items()}


def _cpu_line(cpu: dict[str, float]) -> str:
    return "CPU (% of one core of 2): " + ", ".join(f"{r} {p:.0f}" for r, p in cpu.items())


def _run_agents(port: int, tokens: dict[str, str], seconds: float, flood: Any, since: Any) -> Any:
    out = SPAWN.Queue()
    agents = SPAWN.Process(
        target=_agent_process, args=(port, tokens, seconds, flood, since, out), daemon=True
    )
    agents.start()
    return agents, out


def _ingestion(port: int, server_pid: int, world: dict[str, Any], args: Any) -> None:
    """Closed loop, no clients: how many samples one web process takes in."""
    print(
        f"ingestion without clients: {args.concurrency} connections post back to back for "
        f"{args.seconds:.0f} s per post size, over {len(world['tokens'])} nodes' tokens"
    )
    for label, samples in (
        ("live posts (8 GPUs, one node's second)", GPUS),
        (f"catch-up posts ({args.catch_up:,} samples)", args.catch_up),
    ):
        since = SPAWN.Value("d", 0.0)
        agents, out = _run_agents(
            port, world["tokens"], args.seconds, (samples, args.concurrency), since
        )
        while not since.value:
            time.sleep(0.01)
        cpu = _Cpu(server_pid)
        stats = out.get(timeout=args.seconds + 600)
        used = cpu.stop(args.seconds)
        agents.join()
        used["agents (load)"] = 100 * stats["cpu_s"] / args.seconds
        rate = stats["samples"] / args.seconds
        web_share = used["web process"] / 100
        print(
            f"  {label}: {rate:,.0f} GPU samples/s ({stats['posts'] / args.seconds:,.0f} posts/s);"
            f" post p50 {1000 * _percentile(stats['post_s'], 50):.1f} ms, p99 "
            f"{1000 * _percentile(stats['post_s'], 99):.1f} ms; "
            f"{rate / max(web_share, 1e-9):,.0f} samples per CPU-second of the web process"
        )
        print(f"    {_cpu_line(used)}")


def _fan_out(port: int, server_pid: int, world: dict[str, Any], args: Any) -> None:
    """Agents at one post a second per node, browsers on websockets, the log writer."""
    jobs = world["jobs"]
    targets = [
        (jobs[i % len(jobs)][0], world["cookies"][jobs[i % len(jobs)][1]])
        for i in range(args.clients)
    ]
    connected, stop, since = SPAWN.Event(), SPAWN.Event(), SPAWN.Value("d", 0.0)
    browsers_out, logs_out = SPAWN.Queue(), SPAWN.Queue()
    browsers = SPAWN.Process(  # daemons: a failed run ends them with the bench
        target=_browser_process,
        args=(port, targets, connected, since, stop, browsers_out),
        daemon=True,
    )
    browsers.start()
    started = time.monotonic()
    if not connected.wait(timeout=300):  # every browser connected before agents start
        raise SystemExit("the browsers did not all connect within 300 s")
    print(f"{args.clients} browsers connected in {time.monotonic() - started:.1f} s")
    job_ids = [pk for pk, _ in jobs]
    logs = SPAWN.Process(target=_logs, args=(job_ids, args.seconds, since, logs_out), daemon=True)
    logs.start()
    agents, agents_out = _run_agents(port, world["tokens"], args.seconds, None, since)
    while not since.value:
        time.sleep(0.01)
    cpu = _Cpu(server_pid)
    stats = agents_out.get(timeout=args.seconds + 600)
    used = cpu.stop(args.seconds)
    written = logs_out.get(timeout=60)
    time.sleep(3)  # let the last messages arrive
    stop.set()
    received = browsers_out.get(timeout=120)
    for process in (agents, logs, browsers):
        process.join(timeout=30)
    for role, result in (("agents", stats), ("browsers", received), ("log writer", written)):
        used[role] = 100 * result["cpu_s"] / args.seconds
    _report(args, stats, received, written["lines"], used)


def _report(
    args: argparse.Namespace,
    stats: dict[str, Any],
    browsers: dict[str, Any],
    lines_written: int,
    used: dict[str, float],
) -> None:
    seconds = args.seconds
    print(
        f"{args.nodes} nodes × {GPUS} GPUs post every second; {args.clients} browsers; "
        f"{seconds:.0f} s"
    )
    print(_cpu_line(used))
    print(
        f"ingested: {stats['samples'] / seconds:,.0f} GPU samples/s ({GPUS} per post); post p50 "
        f"{1000 * _percentile(stats['post_s'], 50):.1f} ms, p99 "
        f"{1000 * _percentile(stats['post_s'], 99):.1f} ms"
    )
    clients_per_job = args.clients / (args.nodes * JOBS_PER_NODE)
    expected = stats["posts"] * JOBS_PER_NODE * clients_per_job
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
        f"{1000 * _percentile(browsers['latency'], 99):.0f} ms (goal: p99 ≤ 500 ms)"
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
    expected_lines = int(lines_written * clients_per_job)
    print(
        f"log lines: {browsers['lines']} received of {expected_lines} (written × subscribers);"
        f" gaps seen by a browser: {browsers['log_gaps']}; errors: {browsers['errors']}"
    )


SPAWN = multiprocessing.get_context("spawn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--no-clients", action="store_true")
    parser.add_argument("--catch-up", type=int, default=2000, help="samples per catch-up post")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    _fresh_database()
    _setup_django()
    world = _world(args.nodes)
    port = _free_port()
    server = _serve(port)
    try:
        if args.no_clients:
            _ingestion(port, server.pid, world, args)
        else:
            _fan_out(port, server.pid, world, args)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # open websockets can hold a graceful stop
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
