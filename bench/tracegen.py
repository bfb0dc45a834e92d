"""Synthetic multi-tenant GPU trace, calibrated to published cluster traces; seeded, deterministic.

    python bench/tracegen.py OUT_DIR [--jobs 3000] [--seed 7] [--load 0.9] [--replay]

Writes OUT_DIR/trace.csv, OUT_DIR/cluster.yaml and OUT_DIR/quotas.yaml in the formats
bench/replay.py reads; with --replay it also replays the trace under fifo, fair and capacity and
prints them side by side.

Calibration (bench/scenarios/README.md, the AcmeTrace summary of Philly, Helios, PAI,
Seren and Kalos): runtimes are log-normal with a median of about 300 s and a mean about ten times
that (sigma 2.1: mean/median = exp(sigma^2 / 2)), as in Seren and Helios; most jobs ask for one
GPU, a few are multi-node gangs of 8-GPU nodes that hold most GPU-hours, for about 4 GPUs per job
on average (between Philly's 1.9 and Seren's 5.7). Arrivals are Poisson at the rate that offers
`--load` of the cluster's GPU-seconds. Users overstate runtimes: the limit is 1.5-4 x the runtime,
rounded up to 10 minutes. Twelve teams in three departments have unequal (Zipf) quotas; 15 % of
jobs go to a non-preemptible production queue of higher priority.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from bench.replay import load_trace, print_table, replay
from scheduler import Policy, PolicyConfig

CLUSTER: list[dict[str, Any]] = [
    {"prefix": "h100", "gpu_type": "h100-80g", "count": 32, "gpus_per_node": 8, "racks": 4},
    {"prefix": "a100", "gpu_type": "a100-40g", "count": 16, "gpus_per_node": 8, "racks": 2},
]
TEAMS = [f"team-{name}" for name in "abcdefghijkl"]
MEDIAN_RUNTIME_S, SIGMA = 300.0, 2.1
SHAPES = [  # (weight, nodes, gpus_per_node)
    (0.62, 1, 1),
    (0.12, 1, 2),
    (0.10, 1, 4),
    (0.10, 1, 8),
    (0.04, 2, 8),
    (0.02, 4, 8),
]
COLUMNS = [
    "submit_s",
    "team",
    "department",
    "gpu_type",
    "nodes",
    "gpus_per_node",
    "runtime_s",
    "runtime_limit_s",
    "priority",
    "preemptible",
    "class",
]


def quotas() -> list[dict[str, object]]:
    rows = []
    zipf = [1 / (rank + 1) for rank in range(len(TEAMS))]
    for group in CLUSTER:
        capacity = int(group["count"]) * int(group["gpus_per_node"])
        for team, weight in zip(TEAMS, zipf, strict=True):
            guaranteed = max(1, int(capacity * weight / sum(zipf)))
            rows.append(
                {
                    "team": team,
                    "gpu_type": group["gpu_type"],
                    "guaranteed": guaranteed,
                    "limit": min(capacity, guaranteed * 3 + 8),
                }
            )
    return rows


def jobs(count: int, seed: int, load: float) -> list[dict[str, object]]:
    rng = random.Random(seed)
    capacity = sum(int(g["count"]) * int(g["gpus_per_node"]) for g in CLUSTER)
    mean_gpus = sum(w * n * g for w, n, g in SHAPES)
    mean_runtime = MEDIAN_RUNTIME_S * math.exp(SIGMA**2 / 2)
    rate = load * capacity / (mean_gpus * mean_runtime)
    zipf = [1 / (rank + 1) for rank in range(len(TEAMS))]
    now, rows = 0.0, []
    for _ in range(count):
        now += rng.expovariate(rate)
        _, nodes, gpus = rng.choices(SHAPES, weights=[s[0] for s in SHAPES])[0]
        runtime = min(86_400.0, rng.lognormvariate(math.log(MEDIAN_RUNTIME_S), SIGMA))
        limit = math.ceil(runtime * rng.uniform(1.5, 4.0) / 600) * 600
        team_index = rng.choices(range(len(TEAMS)), weights=zipf)[0]
        production = rng.random() < 0.15
        rows.append(
            {
                "submit_s": round(now, 3),
                "team": TEAMS[team_index],
                "department": f"dept-{team_index % 3}",
                "gpu_type": rng.choice(CLUSTER)["gpu_type"] if rng.random() < 0.4 else "h100-80g",
                "nodes": nodes,
                "gpus_per_node": gpus,
                "runtime_s": round(runtime, 1),
                "runtime_limit_s": limit,
                "priority": 10 if production else 0,
                "preemptible": "false" if production else "true",
                "class": "gang" if nodes > 1 else ("1-gpu" if gpus == 1 else "multi-gpu"),
            }
        )
    return rows


def write(out: Path, count: int, seed: int, load: float) -> tuple[Path, Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    trace, cluster, quota_file = out / "trace.csv", out / "cluster.yaml", out / "quotas.yaml"
    with trace.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        writer.writerows(jobs(count, seed, load))
    cluster.write_text(yaml.safe_dump({"nodes": CLUSTER}, sort_keys=False))
    quota_file.write_text(yaml.safe_dump({"quotas": quotas()}, sort_keys=False))
    return trace, cluster, quota_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--replay", action="store_true", help="compare fifo, fair and capacity")
    args = parser.parse_args()
    paths = write(args.out, args.jobs, args.seed, args.load)
    print("wrote", *paths)
    if args.replay:
        trace = load_trace(*paths)
        for policy in Policy:
            print_table(replay(trace, PolicyConfig(policy=policy)), kueue=False)
            print()


if __name__ == "__main__":
    main()
