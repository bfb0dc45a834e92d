"""Cost of one full scheduling cycle at cluster scale.

    python bench/scheduler_scale.py [--json] [--cycles 50] [--profile]

10,000 queued jobs of 100 teams in 20 departments (four in five with a runtime learnt from
history, as the controller predicts them), 1,000 nodes x 8 GPUs of three types (racks of 20
nodes, NVLink domains of 4), half of the GPUs busy. Each cycle decides a fresh snapshot (a
different seed each time) with every pending job explained, as the controller runs it: with
`decide()` on a queue index kept from the cycle before (the controller's `QueuedRequests` keeps
one, adding and removing the jobs that came and went). Prints p50 / p99 of that cycle against the
goal (100 ms / 300 ms), decisions per second, and beside them `schedule()`, which builds the
index from the snapshot as well (a caller that keeps nothing). It says which scheduler it timed:
the source, or the modules `make compiled` builds (as the production image runs it).

    python bench/scheduler_scale.py --compare-compiled 3

compiles a copy of the scheduler (`bench.compiled`) and times it and the source alternately, in
that many rounds of `--cycles` each, one process per round: the ratio holds on a machine whose
speed drifts.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import scheduler
from bench.compiled import ROOT, compile_scheduler
from scheduler import (
    Decisions,
    JobRequest,
    NodeState,
    PolicyConfig,
    QuotaInfo,
    RunningJob,
    Snapshot,
    TeamInfo,
    schedule,
)
from scheduler.decide import decide
from scheduler.queue import QueueIndex

TYPES = (("h100-80g", 400), ("a100-40g", 400), ("l40s", 200))
GOAL_P50_MS, GOAL_P99_MS = 100.0, 300.0
NOW = 1_700_000_000.0


def build(seed: int, queued: int = 10_000, teams: int = 100, departments: int = 20) -> Snapshot:
    rng = random.Random(seed)
    team_infos = tuple(
        TeamInfo(f"team-{i:03d}", f"dept-{i % departments:02d}", rng.choice([1.0, 1.0, 2.0]))
        for i in range(teams)
    )
    quotas = tuple(
        QuotaInfo(t.name, gpu_type, guaranteed, guaranteed * 3)
        for t in team_infos
        for gpu_type, count in TYPES
        for guaranteed in [max(1, int(count * 8 / teams * rng.uniform(0.5, 1.5)))]
    )
    nodes, running = _busy_nodes(rng, team_infos)
    jobs = tuple(_job(rng, i, team_infos, NOW - rng.uniform(0, 86_400)) for i in range(queued))
    usage = {t.name: rng.uniform(0, 1e8) for t in team_infos}
    return Snapshot(NOW, jobs, tuple(running), tuple(nodes), team_infos, quotas, (), usage)


def _busy_nodes(
    rng: random.Random, teams: tuple[TeamInfo, ...]
) -> tuple[list[NodeState], list[RunningJob]]:
    nodes, running = [], []
    job_id = 1_000_000
    index = 0
    for gpu_type, count in TYPES:
        for _ in range(count):
            name = f"{gpu_type}-{index:04d}"
            labels = {"rack": f"rack-{index // 20}", "nvlink_domain": f"nvl-{index // 4}"}
            free = 8
            while free > 0 and rng.random() < 0.55:
                gpus = min(free, rng.choice([1, 2, 4, 8]))
                job = _job(rng, job_id, teams, NOW - 7200, gpu_type=gpu_type, nodes=1, gpus=gpus)
                running.append(RunningJob(job, NOW - rng.uniform(0, 7200), ((name, gpus),)))
                free -= gpus
                job_id += 1
            nodes.append(NodeState(name, gpu_type, 8, free, labels))
            index += 1
    return nodes, running


def _job(
    rng: random.Random,
    job_id: int,
    teams: tuple[TeamInfo, ...],
    submit: float,
    gpu_type: str | None = None,
    nodes: int | None = None,
    gpus: int | None = None,
) -> JobRequest:
    gang = rng.random() < 0.03
    limit = min(7 * 86_400.0, rng.lognormvariate(7.0, 1.5))
    return JobRequest(
        job_id,
        rng.choice(teams).name,
        f"user-{rng.randint(0, 9)}",
        gpu_type or rng.choice([t for t, _ in TYPES]),
        nodes or (rng.choice([2, 4, 8]) if gang else 1),
        gpus or (8 if gang else rng.choice([1, 1, 1, 1, 2, 4, 8])),
        submit,
        limit,
        rng.choice([0, 0, 0, 10, 100]),
        rng.random() < 0.7,
        # most members have history: the controller predicts their runtimes (learnt)
        limit * rng.uniform(0.2, 0.7) if rng.random() < 0.8 else None,
    )


def measure(cycles: int) -> dict[str, float]:
    config = PolicyConfig()
    kept, scratch, decisions = [], [], 0
    for seed in range(cycles):
        # One snapshot alive at a time, as in the controller; collect the previous one's garbage
        # outside the timed region.
        snapshot = build(seed)
        index = QueueIndex.from_jobs(snapshot.queued)
        gc.collect()
        gc.freeze()  # the snapshot is long-lived: keep it out of the collector's scans
        began = time.perf_counter()
        result = decide(snapshot, index, config, explain=True)
        kept.append(time.perf_counter() - began)
        began = time.perf_counter()
        again = schedule(snapshot, config)
        scratch.append(time.perf_counter() - began)
        gc.unfreeze()
        _same(result, again)
        decisions += len(result.admissions) + len(result.preemptions) + len(result.pending)
    return {
        "cycle_p50_ms": _percentile(kept, 0.5),
        "cycle_p99_ms": _percentile(kept, 0.99),
        "schedule_p50_ms": _percentile(scratch, 0.5),
        "schedule_p99_ms": _percentile(scratch, 0.99),
        "decisions_per_s": decisions / sum(kept),
        "admissions_last_cycle": float(len(result.admissions)),
    }


def _percentile(times: list[float], share: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] * 1000


def _same(kept: Decisions, scratch: Decisions) -> None:
    """Both ways decide alike (else the figures would compare different work)."""
    assert kept.admissions == scratch.admissions and kept.pending == scratch.pending


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--compare-compiled", type=int, metavar="ROUNDS", default=0)
    args = parser.parse_args()
    if args.compare_compiled:
        compare_compiled(args.compare_compiled, args.cycles)
        return
    if args.profile:
        snapshot = build(0)
        cProfile.runctx(
            "schedule(snapshot, PolicyConfig())", globals(), locals(), "/tmp/scale.prof"
        )
        pstats.Stats("/tmp/scale.prof").sort_stats("tottime").print_stats(25)
        return
    figures = measure(args.cycles)
    if args.json:
        print(json.dumps({**figures, "compiled": scheduler.COMPILED}, indent=2))
        return
    print("scheduler:", "compiled by mypyc" if scheduler.COMPILED else "interpreted (the source)")
    print(
        f"cycle p50 {figures['cycle_p50_ms']:8.1f} ms   goal {GOAL_P50_MS:.0f} ms   "
        f"ratio {figures['cycle_p50_ms'] / GOAL_P50_MS:.2f}"
    )
    print(
        f"cycle p99 {figures['cycle_p99_ms']:8.1f} ms   goal {GOAL_P99_MS:.0f} ms   "
        f"ratio {figures['cycle_p99_ms'] / GOAL_P99_MS:.2f}"
    )
    print(f"decisions/s {figures['decisions_per_s']:10.0f} (admissions, preemptions, explanations)")
    print(
        f"schedule()  p50 {figures['schedule_p50_ms']:.1f} ms, "
        f"p99 {figures['schedule_p99_ms']:.1f} ms (the queue index built in the cycle)"
    )


def compare_compiled(rounds: int, cycles: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        build = compile_scheduler(Path(directory))
        runs: dict[str, list[dict[str, float]]] = {"compiled": [], "source": []}
        for _ in range(rounds):
            for name, cwd in (("compiled", build), ("source", ROOT)):
                figures = _run_in(cwd, cycles)
                if bool(figures["compiled"]) != (name == "compiled"):
                    raise SystemExit("this checkout's scheduler is compiled: `make interpreted`")
                runs[name].append(figures)
                print(
                    f"{name:9} p50 {figures['cycle_p50_ms']:7.1f} ms   "
                    f"p99 {figures['cycle_p99_ms']:7.1f} ms"
                )
    p50 = {name: statistics.median(r["cycle_p50_ms"] for r in runs[name]) for name in runs}
    ratios = [
        s["cycle_p50_ms"] / c["cycle_p50_ms"]
        for c, s in zip(runs["compiled"], runs["source"], strict=True)
    ]
    print(
        f"median p50: compiled {p50['compiled']:.1f} ms, source {p50['source']:.1f} ms "
        f"(goal {GOAL_P50_MS:.0f} ms); source / compiled per round "
        + ", ".join(f"{ratio:.2f}" for ratio in ratios)
    )


def _run_in(cwd: Path, cycles: int) -> dict[str, float]:
    """This bench in a process whose `scheduler` is the one in `cwd` (imported first)."""
    script = (
        "import runpy, sys, scheduler\n"
        f"sys.argv = ['scheduler_scale', '--json', '--cycles', '{cycles}']\n"
        f"runpy.run_path({str(Path(__file__))!r}, run_name='__main__')\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, check=True
    )
    figures: dict[str, float] = json.loads(ran.stdout)
    return figures


if __name__ == "__main__":
    main()
