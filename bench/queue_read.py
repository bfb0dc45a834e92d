"""The controller's read of the queue per cycle, kept (`QueuedRequests.current`) against read
whole, with thousands of jobs waiting.

A fresh database (`portal_queue_bench`) gets `--queued` waiting jobs among `--ended` finished
ones. Each simulated cycle then submits `--churn` jobs and admits as many of the oldest (as the
controller does, telling the queue), and times the queue's read: kept (the newest ids read, the
older ones checked by one checksum from the partial index of queued ids) and whole (every queued
id read, as each cycle did before). Both see the same churn, alternating; prints the average and
p50 of each and their ratio.

    python bench/queue_read.py [--queued 10000] [--ended 5000] [--churn 40] [--cycles 100]

Needs PostgreSQL on 127.0.0.1:5432 (BENCH_DATABASE_URL overrides); nothing else.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.postgres import fresh_database, use_environment

DATABASE = "portal_queue_bench"


def _prepare(queued: int, ended: int) -> None:
    use_environment(DATABASE)
    fresh_database(DATABASE)
    import django

    django.setup()
    from django.contrib.auth.models import User

    from jobs.models import State
    from quotas.models import GpuType, Queue
    from tenants.models import Team

    gpu = GpuType.objects.create(name="unit", product_label="UNIT", memory_gb=80, gpus_per_node=8)
    user = User.objects.create_user("bench")
    teams = [Team.objects.create(slug=f"team-{t}", name=f"Team {t}") for t in range(30)]
    queues = [Queue.objects.create(team=t, name="normal", priority=100) for t in teams]
    # Interleaved as a busy cluster leaves them: waiting jobs among ended ones.
    total = queued + ended
    states = [
        State.QUEUED if i * queued // total != (i + 1) * queued // total else State.SUCCEEDED
        for i in range(total)
    ]
    _jobs(gpu, user, teams, queues, states)


def _jobs(gpu, user, teams, queues, states) -> list[int]:
    from jobs.models import Job

    rows = [
        Job(
            team=teams[i % len(teams)],
            owner=user,
            queue=queues[i % len(queues)],
            gpu_type=gpu,
            name="bench",
            image="bench:1",
            gpus_per_node=1,
            cpu=1,
            memory="1Gi",
            max_runtime=3600,
            state=state,
        )
        for i, state in enumerate(states)
    ]
    return [job.pk for job in Job.unscoped.bulk_create(rows, batch_size=2000)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--ended", type=int, default=5_000)
    parser.add_argument("--churn", type=int, default=40, help="jobs submitted and admitted a cycle")
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    _prepare(args.queued, args.ended)

    from django.contrib.auth.models import User
    from django.db import connection

    from cluster.snapshot import QueuedRequests
    from jobs.models import Job, State
    from quotas.models import GpuType, Queue
    from tenants.models import Team

    gpu, user = GpuType.objects.get(), User.objects.get()
    teams, queues = list(Team.objects.order_by("id")), list(Queue.unscoped.order_by("id"))
    kept, whole = QueuedRequests(), QueuedRequests()
    kept.current(), whole.current()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE jobs_job")
    times: dict[str, list[float]] = {"kept": [], "whole": []}
    for cycle in range(args.cycles):
        _jobs(gpu, user, teams, queues, [State.QUEUED] * args.churn)
        oldest = list(
            Job.unscoped.filter(state=State.QUEUED)
            .order_by("id")
            .values_list("id", flat=True)[: args.churn]
        )
        Job.unscoped.filter(pk__in=oldest).update(state=State.ADMITTED)
        kept.left(oldest)
        whole.left(oldest)
        for name in ("kept", "whole") if cycle % 2 else ("whole", "kept"):
            started = time.perf_counter()
            if name == "kept":
                requests = kept.current()
            else:  # every queued id read, as a cycle did before the checksum
                whole._read_all(whole._queues)
                requests = list(whole._known.values())
            times[name].append(1000 * (time.perf_counter() - started))
            assert len(requests) == args.queued, (name, len(requests))
        if cycle % 25 == 24:  # what autovacuum does now and then
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE jobs_job")
    assert [r.id for r in kept.current()] == [r.id for r in whole.current()]
    figures: dict[str, Any] = {
        name: {
            "avg_ms": round(statistics.mean(ms), 2),
            "p50_ms": round(statistics.median(ms), 2),
        }
        for name, ms in times.items()
    }
    figures["ratio_avg"] = round(figures["kept"]["avg_ms"] / figures["whole"]["avg_ms"], 3)
    figures.update(queued=args.queued, ended=args.ended, churn=args.churn, cycles=args.cycles)
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"queue read per cycle, {args.queued} waiting among {args.queued + args.ended} jobs, "
        f"{args.churn} submitted and {args.churn} admitted a cycle, {args.cycles} cycles:"
    )
    for name in ("kept", "whole"):
        avg, p50 = figures[name]["avg_ms"], figures[name]["p50_ms"]
        print(f"  {name:<6} avg {avg:6.2f} ms   p50 {p50:6.2f} ms")
    print(f"  kept / whole: {figures['ratio_avg']}")


if __name__ == "__main__":
    main()
