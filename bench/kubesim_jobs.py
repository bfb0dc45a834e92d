"""kubesim's CPU per job under the end-to-end benchmark's load, without the portal.

Starts kubesim as a subprocess with the e2e cluster (30 nodes x 20 GPUs, speed 1) and plays the
controller's part over HTTP: the same four watches (portal Jobs and Pods by label, Nodes,
Warning Events; 30 s watches resumed from the last resourceVersion, bookmarks on), one Job per
admission as `cluster/manifests.py` builds it (Indexed, one pod pinned to a node with free GPUs,
`nvidia.com/gpu` limits, ttlSecondsAfterFinished), created at a fixed rate by eight workers,
and every pod's log followed from the start once its pod runs, as `cluster/logs.py` does.
Prints kubesim's CPU per job (its /proc counters over the run) and the client's own.

    python bench/kubesim_jobs.py [--jobs 3000] [--rate 250] [--profile OUT] [--json]

`--profile OUT` writes kubesim's cProfile (its server loop) to OUT when it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parent.parent
NODES, GPUS_PER_NODE, TEAMS = 30, 20, 30
MANAGED = "app.kubernetes.io/managed-by"
SELECTOR = f"{MANAGED}=gpu-portal"
RUNTIMES = (0.2, 0.5, 1.0)  # seconds: the scenario's small, medium and large jobs
WATCHES = {
    "jobs": ("/apis/batch/v1/jobs", {"labelSelector": SELECTOR}),
    "pods": ("/api/v1/pods", {"labelSelector": SELECTOR}),
    "nodes": ("/api/v1/nodes", {}),
    "events": ("/api/v1/events", {"fieldSelector": "type=Warning"}),
}
GOAL_MS = 5.0
Obj = dict[str, Any]


def _cluster_file(directory: Path) -> Path:
    path = directory / "cluster.yaml"
    pool = {
        "name": "unit",
        "count": NODES,
        "gpuProduct": "KUBESIM-UNIT-GPU",
        "gpusPerNode": GPUS_PER_NODE,
        "gpuMemoryMiB": 81920,
        "cpu": "256",
        "memory": "2Ti",
        "rack": "r",
    }
    path.write_text(yaml.safe_dump({"pools": [pool]}))
    return path


def _start(directory: Path, profile: str | None) -> tuple[subprocess.Popen[bytes], str]:
    command = [sys.executable, "-m", "kubesim", "--cluster", str(_cluster_file(directory))]
    command += ["--port", "0", *(["--profile", profile] if profile else [])]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()  # "kubesim serving URL (...)" once the port is bound
    return proc, line.split()[2]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _team_objects(namespace: str) -> list[tuple[str, Obj]]:
    """What the portal provisions per team (cluster/manifests.py `team_objects`)."""
    meta = {"namespace": namespace, "labels": {MANAGED: "gpu-portal"}}
    container_defaults = {
        "type": "Container",
        "defaultRequest": {"cpu": "1", "memory": "4Gi"},
        "default": {"cpu": "4", "memory": "16Gi"},
    }
    base = f"/api/v1/namespaces/{namespace}"
    return [
        ("/api/v1/namespaces", {"metadata": {"name": namespace, "labels": meta["labels"]}}),
        (
            f"{base}/resourcequotas",
            {
                "metadata": {"name": "gpu-quota", **meta},
                "spec": {"hard": {"requests.nvidia.com/gpu": "120"}},
            },
        ),
        (
            f"{base}/limitranges",
            {"metadata": {"name": "defaults", **meta}, "spec": {"limits": [container_defaults]}},
        ),
        (
            f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies",
            {
                "metadata": {"name": "default-deny", **meta},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
            },
        ),
    ]


def _affinity(node: str, name: str) -> Obj:
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [pin]}]
            }
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": name}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        },
    }


def _container(runtime: float) -> Obj:
    resources = {"cpu": "4.000", "memory": "16Gi", "nvidia.com/gpu": "1"}
    return {
        "name": "main",
        "image": "bench:1",
        "command": ["run"],
        "args": [],
        "env": [{"name": "KUBESIM_RUNTIME_SECONDS", "value": str(runtime)}],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def job_object(job_id: int, namespace: str, node: str, runtime: float) -> Obj:
    """The shape of `cluster.manifests.job_object` for a one-node, one-GPU job."""
    name = f"job-{job_id}-1"
    labels = {MANAGED: "gpu-portal", "portal.gpu/team": namespace, "portal.gpu/job-id": str(job_id)}
    pod_annotations = {"portal.gpu/attempt": "1", "kubesim.io/runtime-seconds": str(runtime)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {"portal.gpu/owner": "bench", "portal.gpu/attempt": "1"},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 0,
            "activeDeadlineSeconds": 3600,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": labels, "annotations": pod_annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "priorityClassName": "gpu-portal-p50",
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "affinity": _affinity(node, name),
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "containers": [_container(runtime)],
                },
            },
        },
    }


@dataclass
class Run:
    """The client's side of one run: GPUs it placed, what it saw, what it followed."""

    url: str
    http: aiohttp.ClientSession
    total: int
    free: dict[str, int] = field(default_factory=dict)
    placed: dict[str, str] = field(default_factory=dict)  # job name -> node, until its pod ends
    complete: set[str] = field(default_factory=set)
    followed: set[str] = field(default_factory=set)
    follows: set[asyncio.Task[None]] = field(default_factory=set)
    events: Counter[str] = field(default_factory=Counter)
    log_lines: int = 0
    most_follows: int = 0
    capacity: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def place(self) -> str | None:
        """Best fit: the node with the fewest free GPUs that still has one."""
        fits = [(free, node) for node, free in self.free.items() if free > 0]
        return min(fits)[1] if fits else None

    def release(self, job: str) -> None:
        node = self.placed.pop(job, None)
        if node is not None:
            self.free[node] += 1
            self.capacity.set()


async def _json(run: Run, method: str, path: str, body: Obj | None = None) -> Obj:
    async with run.http.request(method, run.url + path, json=body) as response:
        data: Obj = await response.json()
        if response.status >= 400 and response.status != 409:
            raise RuntimeError(f"{method} {path}: {response.status} {data.get('message')}")
        return data


async def _setup(run: Run) -> None:
    await _json(
        run,
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"metadata": {"name": "gpu-portal-p50"}, "value": 50, "globalDefault": False},
    )
    for team in range(TEAMS):
        for path, obj in _team_objects(f"gpu-team-{team}"):
            await _json(run, "POST", path, obj)
    nodes = await _json(run, "GET", "/api/v1/nodes")
    run.free = {n["metadata"]["name"]: GPUS_PER_NODE for n in nodes["items"]}


async def _watch(run: Run, kind: str, ready: asyncio.Event) -> None:
    """List, then watch from its resourceVersion, resuming each 30 s watch where it ended."""
    path, selectors = WATCHES[kind]
    listing = await _json(run, "GET", path + "".join(f"?{k}={v}" for k, v in selectors.items()))
    version = listing["metadata"]["resourceVersion"]
    query = {"watch": "true", "timeoutSeconds": "30", "allowWatchBookmarks": "true", **selectors}
    ready.set()
    while not run.done.is_set():
        params = {**query, "resourceVersion": version}
        async with run.http.get(run.url + path, params=params, timeout=None) as response:
            async for line in response.content:
                event = json.loads(line)
                if event["type"] == "ERROR":
                    raise RuntimeError(f"watch {kind}: {event['object'].get('message')}")
                version = event["object"]["metadata"].get("resourceVersion", version)
                run.events[f"{kind} {event['type']}"] += 1
                _seen(run, kind, event["type"], event["object"])


def _seen(run: Run, kind: str, type_: str, obj: Obj) -> None:
    if kind == "pods" and type_ != "BOOKMARK":
        _pod(run, type_, obj)
    elif kind == "jobs" and type_ != "BOOKMARK":
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Complete" and c["status"] == "True" for c in conditions):
            run.complete.add(obj["metadata"]["name"])
            _check_done(run)


def _pod(run: Run, type_: str, pod: Obj) -> None:
    phase = (pod.get("status") or {}).get("phase")
    name = pod["metadata"]["name"]
    job = pod["metadata"]["labels"].get("batch.kubernetes.io/job-name", "")
    if type_ == "DELETED" or phase in ("Succeeded", "Failed"):
        run.release(job)
    if phase in ("Running", "Succeeded", "Failed") and name not in run.followed:
        run.followed.add(name)
        task = asyncio.create_task(_follow(run, pod["metadata"]["namespace"], name))
        run.follows.add(task)
        run.most_follows = max(run.most_follows, len(run.follows))
        task.add_done_callback(lambda t: _followed(run, t))


def _followed(run: Run, task: asyncio.Task[None]) -> None:
    run.follows.discard(task)
    _check_done(run)


def _check_done(run: Run) -> None:
    if len(run.complete) >= run.total and not run.follows:
        run.done.set()


async def _follow(run: Run, namespace: str, pod: str) -> None:
    """Read the pod's log from the start until the stream ends (the pod has stopped)."""
    path = f"{run.url}/api/v1/namespaces/{namespace}/pods/{pod}/log"
    async with run.http.get(path, params={"follow": "true"}, timeout=None) as response:
        if response.status != 200:
            return
        async for chunk in response.content.iter_any():
            run.log_lines += chunk.count(b"\n")


async def _create(run: Run, queue: asyncio.Queue[Obj | None]) -> None:
    while (job := await queue.get()) is not None:
        path = f"/apis/batch/v1/namespaces/{job['metadata']['namespace']}/jobs"
        await _json(run, "POST", path, job)


async def _submit(run: Run, rate: float, waited: list[float]) -> None:
    """Admit job i at start + i / rate (or once a GPU frees), then hand it to a create worker."""
    queue: asyncio.Queue[Obj | None] = asyncio.Queue()
    workers = [asyncio.create_task(_create(run, queue)) for _ in range(8)]
    rng, started = random.Random(7), time.monotonic()
    for i in range(run.total):
        due = started + i / rate
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        while (node := run.place()) is None:
            run.capacity.clear()
            await run.capacity.wait()
        waited.append(max(0.0, time.monotonic() - due))
        job = job_object(i + 1, f"gpu-team-{i % TEAMS}", node, rng.choice(RUNTIMES))
        run.free[node] -= 1
        run.placed[job["metadata"]["name"]] = node
        queue.put_nowait(job)
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)


async def _drive(url: str, pid: int, jobs: int, rate: float) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        run = Run(url, http, jobs)
        await _setup(run)
        readies = {kind: asyncio.Event() for kind in WATCHES}
        watches = [asyncio.create_task(_watch(run, k, r)) for k, r in readies.items()]
        await asyncio.gather(*(r.wait() for r in readies.values()))
        cpu0, own0, wall0 = _cpu_s(pid), _own_cpu_s(), time.monotonic()
        waited: list[float] = []
        await _submit(run, rate, waited)
        await asyncio.wait_for(run.done.wait(), timeout=max(120.0, 4 * jobs / rate))
        cpu, own, wall = _cpu_s(pid) - cpu0, _own_cpu_s() - own0, time.monotonic() - wall0
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
    return {
        "jobs": jobs,
        "rate": rate,
        "wall_s": round(wall, 1),
        "kubesim_cpu_ms_per_job": round(1000 * cpu / jobs, 2),
        "kubesim_cores": round(cpu / wall, 2),
        "client_cpu_ms_per_job": round(1000 * own / jobs, 2),
        "avg_wait_for_gpu_s": round(sum(waited) / len(waited), 3),
        "log_lines_per_job": round(run.log_lines / jobs, 2),
        "most_follows_open": run.most_follows,
        "watch_events_per_job": {k: round(v / jobs, 2) for k, v in sorted(run.events.items())},
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=250.0, help="Jobs created per second")
    parser.add_argument("--profile", help="write kubesim's cProfile here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = _start(Path(tmp), args.profile)
        try:
            result = asyncio.run(_drive(url, proc.pid, args.jobs, args.rate))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for key, value in result.items():
        print(f"{key:24} {value}")
    verdict = "met" if result["kubesim_cpu_ms_per_job"] <= GOAL_MS else "MISSED"
    print(f"kubesim CPU per job goal <= {GOAL_MS} ms: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
