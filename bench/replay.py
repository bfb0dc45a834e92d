"""Replay a workload through the real scheduler in simulated time and print its figures.

    python bench/replay.py bench/scenarios/kueue-baseline.yaml [--policy fair] [--json]
    python bench/replay.py trace.csv --cluster cluster.yaml --quotas quotas.yaml [--compare]

INPUT is a scenario (YAML, the format of bench/scenarios/) or a trace (CSV with the
columns submit_s, team, department, gpu_type, nodes, gpus_per_node, runtime_s, runtime_limit_s,
priority, preemptible; an optional `class` column labels jobs for the per-class waits).

--cluster FILE (YAML) lists node groups; nodes are named <prefix>-<i>, and `racks` spreads a
group's nodes round-robin over that many racks (label `rack`):

    nodes:
      - {prefix: h100, gpu_type: h100-80g, count: 64, gpus_per_node: 8, racks: 8}

--quotas FILE (YAML) gives each team's quota per GPU type, optional weights and member caps:

    quotas:
      - {team: vision, gpu_type: h100-80g, guaranteed: 64, limit: 128}
    weights: {vision: 2.0}

With --json one JSON object (keys wall_s, usage_pct (useful work), lost_gpu_s and lost_pct (work
preemption threw away), preemptions, wait_s{class|team: {avg,p50,p99}}, avg_jct_s,
fairness{teams, jain_usage_per_share, jain_wait}, eta{class: {submit|change: {n, p50_s, p90_s,
n_relative, p50_rel, p90_rel}}}, quota_violations, plus bookkeeping; see scheduler/metrics.py);
else a table. For the
Kueue baseline scenario, Kueue's published figures are printed alongside with ratios. --compare
runs fifo, fair and capacity side by side.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from scheduler import (
    JobRequest,
    NodeState,
    Policy,
    PolicyConfig,
    QuotaInfo,
    TeamInfo,
)
from scheduler.metrics import report
from scheduler.simulate import Trace, TraceJob, simulate

ETA_GOAL = {"p50_rel": 0.20, "p90_rel": 0.50}
"""Issue 20: the estimate's error relative to the wait, median and p90."""
KUEUE = {"wall_s": 351.0, "usage_pct": 58.7, "large": 6.7, "medium": 76.8, "small": 215.5}
GOAL = {"wall_s": 67.0, "usage_pct": 99.0, "large": 1.7, "medium": 19.0, "small": 54.0}


def load_scenario(path: Path) -> tuple[Trace, PolicyConfig]:
    spec = yaml.safe_load(path.read_text())
    cluster, quota = spec["cluster"], spec["quota_per_team"]
    gpu_type = cluster["gpu_type"]
    nodes = tuple(
        NodeState(f"node-{i:03d}", gpu_type, cluster["gpus_per_node"], cluster["gpus_per_node"])
        for i in range(cluster["nodes"])
    )
    teams = tuple(
        TeamInfo(f"d{d}-t{t}", f"d{d}")
        for d in range(spec["departments"])
        for t in range(spec["teams_per_department"])
    )
    quotas = tuple(QuotaInfo(t.name, gpu_type, quota["guaranteed"], quota["limit"]) for t in teams)
    jobs: list[TraceJob] = []
    for team in teams:
        for workload in spec["workloads_per_team"]:
            for i in range(workload["count"]):
                runtime = workload["runtime_ms"] / 1000
                request = JobRequest(
                    len(jobs) + 1,
                    team.name,
                    f"{team.name}-user",
                    gpu_type,
                    1,
                    workload["gpus"],
                    i * workload["interval_ms"] / 1000,
                    runtime,
                    workload["priority"],
                )
                jobs.append(TraceJob(request, runtime, workload["class"]))
    preemption = spec.get("preemption", {})
    config = PolicyConfig(
        reclaim=preemption.get("reclaim_within_department", "any") != "never",
        priority_preemption=preemption.get("within_team", "lower_priority") != "never",
    )
    return Trace(tuple(jobs), nodes, teams, quotas), config


def load_trace(path: Path, cluster_path: Path, quotas_path: Path) -> Trace:
    nodes = []
    for group in yaml.safe_load(cluster_path.read_text())["nodes"]:
        racks = group.get("racks", 0)
        for i in range(group["count"]):
            labels = {"rack": f"{group['prefix']}-r{i % racks}"} if racks else {}
            gpus = group["gpus_per_node"]
            nodes.append(NodeState(f"{group['prefix']}-{i}", group["gpu_type"], gpus, gpus, labels))
    quota_spec = yaml.safe_load(quotas_path.read_text())
    quotas = tuple(QuotaInfo(**q) for q in quota_spec["quotas"])
    weights = quota_spec.get("weights", {})
    jobs: list[TraceJob] = []
    departments: dict[str, str | None] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            departments[row["team"]] = row["department"] or None
            request = JobRequest(
                len(jobs) + 1,
                row["team"],
                f"{row['team']}-user",
                row["gpu_type"],
                int(row["nodes"]),
                int(row["gpus_per_node"]),
                float(row["submit_s"]),
                float(row["runtime_limit_s"]),
                int(row["priority"]),
                row["preemptible"].strip().lower() in ("1", "true", "yes"),
            )
            jobs.append(TraceJob(request, float(row["runtime_s"]), row.get("class", "")))
    names = sorted(set(departments) | {q.team for q in quotas})
    teams = tuple(TeamInfo(n, departments.get(n), float(weights.get(n, 1.0))) for n in names)
    return Trace(tuple(jobs), tuple(nodes), teams, quotas)


def shares(trace: Trace) -> dict[str, float]:
    owned: dict[str, float] = {t.name: 0.0 for t in trace.teams}
    for quota in trace.quotas:
        owned[quota.team] = owned.get(quota.team, 0.0) + quota.guaranteed
    weights = {t.name: t.weight for t in trace.teams}
    return {team: gpus or weights.get(team, 1.0) for team, gpus in owned.items()}


def replay(
    trace: Trace, config: PolicyConfig, explain_every: int = 1, oracle: bool = False
) -> dict[str, Any]:
    began = time.perf_counter()
    result = simulate(trace, config, explain_every=explain_every, oracle_runtimes=oracle)
    figures = report(result, shares(trace))
    figures["replay_wall_clock_s"] = time.perf_counter() - began
    figures["policy"] = str(config.policy)
    return figures


def _figure(value: float | None, count: int, percent: bool = False) -> str:
    if value is None:
        return f"n/a ({count})"
    return f"{100 * value:.1f} %" if percent else f"{value:.1f}"


def print_eta(eta: dict[str, Any]) -> None:
    print("estimate error |estimated - actual start|: median, p90 in s; relative to the wait")
    heads = ("n", "p50 s", "p90 s", "n rel", "p50", "p90")
    goal = f"goal {100 * ETA_GOAL['p50_rel']:.0f} % / {100 * ETA_GOAL['p90_rel']:.0f} %"
    print(f"{'class':<11}{'made':<9}" + "".join(f"{h:>9}" for h in heads) + f"  {goal}")
    if not eta:
        print("no job waited with an estimate: n/a (0 samples)")
    for label, kinds in eta.items():
        for kind, e in kinds.items():
            made = kind.replace("_not_overtaken", "*")
            print(
                f"{label:<11}{made:<9}{e['n']:>9}{_figure(e['p50_s'], e['n']):>9}"
                f"{_figure(e['p90_s'], e['n']):>9}{e['n_relative']:>9}"
                f"{_figure(e['p50_rel'], e['n_relative'], True):>9}"
                f"{_figure(e['p90_rel'], e['n_relative'], True):>9}  {_verdict(e)}"
            )
    print("* the estimates no later arrival overtook (none submitted after it started first)")


def _verdict(errors: dict[str, Any]) -> str:
    if errors["p50_rel"] is None:
        return "n/a"
    met = all(errors[key] <= goal for key, goal in ETA_GOAL.items())
    return "met" if met else "not met"


def print_table(figures: dict[str, Any], kueue: bool) -> None:
    rows = [("wall_s", figures["wall_s"]), ("usage_pct", figures["usage_pct"])]
    rows += [(f"avg wait {c}", s["avg"]) for c, s in figures["wait_s"]["class"].items()]
    print(
        f"policy {figures['policy']}: {figures['jobs']} jobs, {figures['cycles']} cycles, "
        f"{figures['replay_wall_clock_s']:.2f} s wall-clock"
    )
    print(
        f"{'figure':<18}{'ours':>10}" + (f"{'kueue':>10}{'ratio':>8}{'goal':>8}" if kueue else "")
    )
    for name, ours in rows:
        key = name.removeprefix("avg wait ")
        line = f"{name:<18}{ours:>10.2f}"
        if kueue and key in KUEUE:
            line += f"{KUEUE[key]:>10.1f}{ours / KUEUE[key]:>8.3f}{GOAL[key]:>8.1f}"
        print(line)
    for name in ("lost_pct", "lost_gpu_s", "preemptions", "most_preempted", "avg_jct_s"):
        print(f"{name:<18}{figures[name]:>10.2f}")
    for name in ("quota_violations", "decisions_per_s"):
        print(f"{name:<18}{figures[name]:>10.3f}")
    fairness = figures["fairness"]
    print(
        f"fairness: Jain over teams' usage per share {fairness['jain_usage_per_share']:.3f}, "
        f"over their average waits {fairness['jain_wait']:.3f}"
    )
    print(f"{'team':<12}{'share':>8}{'usage':>8}{'use/share':>10}{'avg wait s':>12}")
    for team, t in fairness["teams"].items():
        print(
            f"{team:<12}{100 * t['share']:>7.1f}%{100 * t['usage_share']:>7.1f}%"
            f"{t['usage_per_share']:>10.2f}{t['avg_wait_s']:>12.1f}"
        )
    print_eta(figures["eta"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("input", type=Path)
    parser.add_argument("--policy", choices=[p.value for p in Policy])
    parser.add_argument("--cluster", type=Path)
    parser.add_argument("--quotas", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--compare", action="store_true", help="fifo, fair and capacity")
    parser.add_argument(
        "--explain-every",
        type=int,
        default=1,
        help="estimate every Nth cycle only (faster; estimates are then sampled)",
    )
    parser.add_argument(
        "--oracle-runtimes",
        action="store_true",
        help="a diagnosis: estimates know every job's true runtime (no scheduler does)",
    )
    args = parser.parse_args(argv)
    if args.input.suffix in (".yaml", ".yml"):
        trace, config = load_scenario(args.input)
    else:
        if args.cluster is None or args.quotas is None:
            parser.error("a CSV trace needs --cluster and --quotas")
        trace, config = load_trace(args.input, args.cluster, args.quotas), PolicyConfig()
    policies = list(Policy) if args.compare else [Policy(args.policy or config.policy)]
    results = [
        replay(
            trace,
            PolicyConfig(**{**_fields(config), "policy": p}),
            args.explain_every,
            args.oracle_runtimes,
        )
        for p in policies
    ]
    kueue = "kueue" in args.input.name
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=2))
        return
    for figures in results:
        print_table(figures, kueue)
        print()


def _fields(config: PolicyConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


if __name__ == "__main__":
    main()
