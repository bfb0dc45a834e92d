"""kubesim at scale: 1,000 nodes x 8 GPUs, 10,000 single-pod Jobs, 20 watches.

Runs kubesim as a subprocess (so its memory and CPU are its own) and drives it over HTTP:
creates/s and server time per create, list latency at 10,000 pods, watch delivery p99 at 500
events/s, and the server's peak RSS. Goals: <= 1 ms per create, list <= 300 ms, p99 <= 50 ms,
memory <= 1 GiB.

    python bench/kubesim_scale.py [--json] [--jobs N] [--nodes N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE, WATCH_NS = "bench", "bench-watch"
GOALS = {
    "server_ms_per_create": 1.0,
    "list_10k_pods_ms": 300.0,
    "watch_p99_ms": 50.0,
    "peak_rss_mib": 1024.0,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(nodes: int, speed: float) -> tuple[subprocess.Popen[bytes], str]:
    cluster = {
        "pools": [
            {
                "name": "gpu",
                "count": nodes,
                "gpuProduct": "NVIDIA-H100-80GB-HBM3",
                "gpusPerNode": 8,
                "rack": "rack-a",
            }
        ]
    }
    path = Path(tempfile.mkdtemp()) / "cluster.yaml"
    path.write_text(yaml.safe_dump(cluster))
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesim",
            "--cluster",
            str(path),
            "--port",
            str(port),
            "--speed",
            str(speed),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # "kubesim serving ..." once the port is bound
    return proc, f"http://127.0.0.1:{port}"


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


def _job(i: int, runtime: float) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"job-{i:05d}"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"kubesim.io/runtime-seconds": str(runtime)}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "train:1",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            }
        },
    }


async def _stats(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(f"{url}/kubesim/v1/stats") as response:
        result: dict[str, Any] = await response.json()
        return result


async def _create_jobs(http: aiohttp.ClientSession, url: str, count: int, runtime: float) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            async with http.post(
                f"{url}/apis/batch/v1/namespaces/{NAMESPACE}/jobs", json=_job(i, runtime)
            ) as r:
                assert r.status == 201, await r.text()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(16)))
    return time.perf_counter() - started


async def _wait_all_done(
    http: aiohttp.ClientSession, url: str, count: int, timeout: float
) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        query = "fieldSelector=status.phase%3DSucceeded&limit=1"
        async with http.get(f"{url}/api/v1/namespaces/{NAMESPACE}/pods?{query}") as r:
            body = await r.json()
        done = len(body["items"]) + (body["metadata"].get("remainingItemCount") or 0)
        if done >= count:
            return time.perf_counter() - started
        await asyncio.sleep(1)
    raise TimeoutError(f"jobs not done after {timeout}s")


async def _list_latency(
    http: aiohttp.ClientSession, url: str, rounds: int = 5
) -> tuple[float, int]:
    timings, items = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        async with http.get(f"{url}/api/v1/namespaces/{NAMESPACE}/pods") as r:
            raw = await r.read()
        timings.append(time.perf_counter() - started)
        items = len(json.loads(raw)["items"])
    return statistics.median(timings) * 1000, items


async def _watch(
    http: aiohttp.ClientSession, url: str, latencies: list[float], ready: asyncio.Event
) -> None:
    rv = (await (await http.get(f"{url}/api/v1/namespaces/{WATCH_NS}/pods")).json())["metadata"][
        "resourceVersion"
    ]
    params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "60"}
    async with http.get(f"{url}/api/v1/namespaces/{WATCH_NS}/pods", params=params) as response:
        ready.set()
        async for line in response.content:
            sent = json.loads(line)["object"]["metadata"].get("annotations", {}).get("bench/sent")
            if sent:
                latencies.append(time.time() - float(sent))


async def _watch_delivery(
    http: aiohttp.ClientSession, url: str, rate: int, seconds: float
) -> tuple[float, int]:
    await http.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": WATCH_NS}})
    for i in range(10):
        pod = {
            "metadata": {"name": f"w{i}"},
            "spec": {"containers": [{"name": "c", "image": "pause:3"}]},
        }
        await http.post(f"{url}/api/v1/namespaces/{WATCH_NS}/pods", json=pod)
    await asyncio.sleep(2)
    latencies: list[float] = []
    readies = [asyncio.Event() for _ in range(20)]
    watchers = [asyncio.create_task(_watch(http, url, latencies, r)) for r in readies]
    await asyncio.gather(*(r.wait() for r in readies))
    started, sent = time.perf_counter(), 0
    headers = {"Content-Type": "application/merge-patch+json"}
    while (elapsed := time.perf_counter() - started) < seconds:
        while sent < elapsed * rate:
            body = {"metadata": {"annotations": {"bench/sent": repr(time.time())}}}
            async with http.patch(
                f"{url}/api/v1/namespaces/{WATCH_NS}/pods/w{sent % 10}", json=body, headers=headers
            ) as r:
                assert r.status == 200
            sent += 1
        await asyncio.sleep(0.002)
    await asyncio.sleep(0.5)
    for task in watchers:
        task.cancel()
    latencies.sort()
    return latencies[int(len(latencies) * 0.99)] * 1000, sent


async def _run(args: argparse.Namespace, url: str, pid: int) -> dict[str, Any]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        await http.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
        before = (await _stats(http, url))["requests"].get("POST", {"count": 0, "seconds": 0.0})
        cpu_before = _cpu_s(pid)
        create_s = await _create_jobs(http, url, args.jobs, args.runtime)
        after = (await _stats(http, url))["requests"]["POST"]
        run_s = await _wait_all_done(http, url, args.jobs, timeout=600)
        cpu_per_job = (_cpu_s(pid) - cpu_before) / args.jobs
        list_ms, items = await _list_latency(http, url)
        p99_ms, events = await _watch_delivery(http, url, rate=500, seconds=args.watch_seconds)
    server_s = after["seconds"] - before["seconds"]
    return {
        "nodes": args.nodes,
        "jobs": args.jobs,
        "creates_per_s": args.jobs / create_s,
        "server_ms_per_create": server_s / (after["count"] - before["count"]) * 1000,
        "server_cpu_ms_per_job_lifecycle": cpu_per_job * 1000,
        "jobs_done_after_creates_s": run_s,
        "list_items": items,
        "list_10k_pods_ms": list_ms,
        "watch_events_sent": events,
        "watchers": 20,
        "watch_p99_ms": p99_ms,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--runtime", type=float, default=30.0, help="simulated seconds per job")
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--watch-seconds", type=float, default=10.0)
    args = parser.parse_args()
    proc, url = _start_server(args.nodes, args.speed)
    try:
        result = asyncio.run(_run(args, url, proc.pid))
        result["peak_rss_mib"] = _peak_rss_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for key, value in result.items():
        goal = GOALS.get(key)
        verdict = (
            "" if goal is None else f"  (goal <= {goal:g}: {'met' if value <= goal else 'MISSED'})"
        )
        print(
            f"{key:28} {value:12.2f}{verdict}"
            if isinstance(value, float)
            else f"{key:28} {value:12}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
