"""Chaos bench: 300 jobs through the REST API while the portal's dependencies and roles fail.

    python bench/chaos.py [--json]

What runs, all on 127.0.0.1: a fresh PostgreSQL database (`portal_chaos`, BENCH_DATABASE_URL
overrides) and a private `redis-server`, each behind a `bench/chaos_proxy.py` that can cut every
connection and refuse new ones (the machine's shared PostgreSQL and Redis are never stopped);
kubesim (a process, its clock sped up SPEED times); the portal's roles as processes: two web
processes (`uvicorn portal.asgi:application`, one port each) and two controllers (`manage.py
controller`: one leads, one stands by). No Celery worker runs: the tree enqueues no task yet, and
no agent: kubesim's fake NVML lives inside its own process. A role process that exits without
being killed by the bench is started again 2 s later, as a Deployment would (and counted).

Eight clients (threads, one user and API token each, spread over three teams) submit 300 jobs
with unique names over SUBMIT_SPAN_S, alternating between the web processes; a client retries on
a connection error, a 5xx or a 429 with the same `Idempotency-Key`, switching web process, for up
to RETRY_FOR_S. Job sizes are mixed (1-8 GPUs, two GPU types, each team's limit below the demand)
and short: 3-12 s of wall time. Meanwhile, at fixed offsets from the first submission:

    10 s  SIGKILL the leading controller; the standby takes over (the killed one returns as
          standby once it has)
    30 s  SIGKILL a web process, while a submission is in flight to it; it returns 2 s later
    50 s  Redis away for 30 s
    95 s  PostgreSQL away for 30 s
   140 s  both controllers away for longer than a finished Job's ttlSecondsAfterFinished
          (cluster/manifests.py FINISHED_TTL_S, in kubesim's sped-up seconds)

then it waits for every job to end (at most DRAIN_S), stops the roles and reports:

- jobs lost: acknowledged (201) or given up by its client yet present, and not ended after the
  drain; or acknowledged and absent.
- jobs run twice: portal jobs for which kubesim started pods of more than one Kubernetes Job (a
  watch on kubesim's pods, independent of the portal); the portal's own view (more than one
  RUNNING transition, or attempts > 1) is shown beside it. No node fails and no queue is
  preemptible here, so any second run is a fault.
- duplicate submissions: jobs in the database beyond one per client submission (each carries a
  unique name).
- quota violations: one-second samples of the database in which a team's admitted GPUs (ADMITTED
  or RUNNING) of a GPU type exceeded its quota's limit.
- 5xx answers by cause: which dependency was away while the request was in flight (GRACE_S after
  its return still counts as its outage), or "none". Connection errors likewise ("web" while a
  killed web process is away).
- the `manage.py audit_verify` result.

The goal is 0, 0, 0, 0, 5xx only while a dependency is away, and the audit chain intact. Besides:
jobs whose end differs from their spec's exit code (wrong outcomes); the most GPUs each team held
of each type against its limit (whether the limits were reached at all); how many Jobs finished
while the controllers were away (the TTL case needs some) and how many pods were deleted
meanwhile; the requeue reasons; how long the takeover took; role processes that exited on their
own (with their exception); and the exceptions the roles logged. Redis away should cause no 5xx
at all (issue 18 item 4: the API degrades to the database); the report says so when it does.

Everything is bounded: the bench stops by itself after DEADLINE_S, reports what it has and ends
every process it started. Role logs stay in the run directory it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter, defaultdict
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.chaos_clients import CLIENTS, GPU_TYPES, JOBS, TEAMS, Answer, Client, Submission, plan
from bench.chaos_observe import PodWatch, QuotaSampler
from bench.chaos_roles import EXCEPTION, Role, answers, end, free_port, spawn
from bench.postgres import ROOT, fresh_database, use_environment

DATABASE = "portal_chaos"
PREFIX = "chaos"  # Redis cache key and channel prefixes of the bench's roles
PYTHON = sys.executable
SPEED = 100.0
"""kubesim seconds per wall second: a finished Job's TTL (an hour) passes in 36 s."""
DEADLINE_S = 15 * 60.0
DRAIN_S = 240.0
REPORT_RESERVE_S = 60.0
"""Kept from the deadline for stopping the roles, the figures and `audit_verify`."""
OUTAGE_S = 30.0
CONTROLLERS_AWAY_MARGIN_S = 20.0
GRACE_S = 5.0
"""After a dependency returns, answers within this long still count as its outage's."""
NODES_PER_TYPE = 3
GPUS_PER_NODE = 8
GUARANTEED, LIMIT = 4, 12
QUEUE_RUNTIME_S = 4 * 3600
HTTP_PROBE = b"GET /accounts/login/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


class OutOfTime(Exception):
    """The overall deadline came before the timeline's end: report what there is."""


# -- the bench ---------------------------------------------------------------------------------


@dataclass
class Outage:
    cause: str
    start: float
    end: float = float("inf")

    def overlaps(self, sent: float, answered: float) -> bool:
        return sent <= self.end + GRACE_S and answered >= self.start


class Bench:
    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir
        self.deadline = time.monotonic() + DEADLINE_S
        self.helpers: list[subprocess.Popen[Any]] = []
        self.roles: dict[str, Role] = {}
        self.outages: list[Outage] = []
        self.stop = threading.Event()
        self.in_flight: Counter[int] = Counter()
        self.events: list[str] = []
        self.takeover_s: float | None = None
        self.while_away = {"jobs_finished": 0, "pods_deleted": 0}
        """While the controllers were away: Kubernetes Jobs that finished, pods deleted."""
        self.t0 = 0.0

    # -- setting up --

    def helper(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Path:
        log = self.dir / f"{name}.log"
        self.helpers.append(spawn(argv, log, env))
        return log

    def start_redis(self) -> int:
        port = free_port()
        self.helper(
            "redis",
            ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", ""],
        )
        self.ready(lambda: answers(port, b"PING\r\n", b"+PONG"), "redis-server", 30)
        return port

    def start_proxy(self, name: str, target: int) -> tuple[subprocess.Popen[Any], int]:
        log = self.helper(
            name, [PYTHON, str(ROOT / "bench" / "chaos_proxy.py"), "--target", str(target)]
        )
        self.ready(lambda: log.read_text().startswith("listening"), name, 30)
        return self.helpers[-1], int(log.read_text().split()[1])

    def start_kubesim(self) -> tuple[str, Path]:
        import yaml

        cluster, kubeconfig = self.dir / "cluster.yaml", self.dir / "kubeconfig"
        pools = [
            {
                "name": name,
                "count": NODES_PER_TYPE,
                "gpuProduct": product,
                "gpusPerNode": GPUS_PER_NODE,
                "rack": f"rack-{name}",
                "cpu": "96",
                "memory": "1Ti",
            }
            for name, product in GPU_TYPES.items()
        ]
        # Heartbeats in kubesim's seconds: at x100, the default minute would have every node
        # report to the controllers' watch more than once a second.
        cluster.write_text(yaml.safe_dump({"heartbeatSeconds": 3600, "pools": pools}))
        argv = [PYTHON, "-m", "kubesim", "--cluster", str(cluster), "--port", "0"]
        self.helper("kubesim", [*argv, "--kubeconfig", str(kubeconfig), "--speed", str(SPEED)])
        self.ready(kubeconfig.exists, "kubesim", 60)
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        return str(server), kubeconfig

    def start_roles(self, env: dict[str, str], kubeconfig: Path) -> list[int]:
        ports = [free_port(), free_port()]
        for i, port in enumerate(ports):
            argv = [PYTHON, "-m", "uvicorn", "portal.asgi:application", "--host", "127.0.0.1"]
            argv += ["--port", str(port), "--no-access-log", "--log-level", "warning"]
            self.roles[f"web-{i}"] = Role(f"web-{i}", argv, env, self.dir / f"web-{i}.log", port)
        for name in ("controller-a", "controller-b"):
            argv = [PYTHON, "manage.py", "controller", "--kubeconfig", str(kubeconfig)]
            self.roles[name] = Role(name, argv, env, self.dir / f"{name}.log")
        for role in self.roles.values():
            role.start()
        return ports

    # -- waiting, with the roles supervised --

    def _until(self, done: Any, limit_s: float) -> bool:
        """Wait, supervising the roles, until `done()` or `limit_s`; whether it came."""
        give_up = min(self.deadline, time.monotonic() + limit_s)
        while not done():
            if time.monotonic() >= give_up:
                return False
            self.supervise()
            time.sleep(0.25)
        return True

    def ready(self, done: Any, what: str, limit_s: float) -> None:
        if not self._until(done, limit_s):
            raise OutOfTime(f"{what} not ready after {limit_s:.0f} s")

    def supervise(self) -> None:
        now = time.monotonic()
        for role in self.roles.values():
            role.supervise(now)

    def at(self, offset: float) -> None:
        """Wait, supervising the roles, until `offset` seconds after the first submission."""
        self.wait(self.t0 + offset - time.monotonic())

    def wait(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        if until > self.deadline - REPORT_RESERVE_S:
            raise OutOfTime("the deadline came first")
        while (left := until - time.monotonic()) > 0:
            self.supervise()
            time.sleep(min(0.25, left))

    def note(self, what: str) -> None:
        self.events.append(f"{time.monotonic() - self.t0:6.1f} s  {what}")

    # -- the faults --

    def leader(self) -> Role | None:
        from django.utils import timezone

        from cluster.models import Lease

        lease = Lease.objects.filter(name="controller", expires_at__gt=timezone.now()).first()
        match = re.search(r"-(\d+)-[0-9a-f]+$", lease.holder) if lease else None
        pid = int(match.group(1)) if match else 0
        return next((r for r in self.roles.values() if r.pid == pid and pid), None)

    def kill_leader(self) -> None:
        leader = self.leader()
        if leader is None:
            self.note("no controller led: none killed")
            return
        leader.held = True
        leader.kill()
        killed = time.monotonic()
        self.note(f"SIGKILL {leader.name} (leader)")
        try:
            if self._until(lambda: self.leader() not in (None, leader), 60):
                self.takeover_s = round(time.monotonic() - killed, 1)
                self.note(f"the standby took over after {self.takeover_s} s")
            else:
                self.note("no takeover within 60 s")
        finally:
            leader.held = False  # back as the standby

    def kill_web(self) -> None:
        web = self.roles["web-0"]
        give_up = time.monotonic() + 10
        while not self.in_flight[0] and time.monotonic() < give_up:
            time.sleep(0.005)
        in_flight = self.in_flight[0]
        outage = Outage("web", time.monotonic())
        self.outages.append(outage)
        web.kill()
        self.note(f"SIGKILL web-0 ({in_flight} submissions in flight to it)")
        back = self._until(lambda: answers(web.port, HTTP_PROBE, b"HTTP/"), 60)
        outage.end = time.monotonic()
        self.note("web-0 answers again" if back else "web-0 not back within 60 s")

    def dependency_away(self, cause: str, proxy: subprocess.Popen[Any]) -> None:
        outage = Outage(cause, time.monotonic())
        self.outages.append(outage)
        proxy.send_signal(signal.SIGUSR1)
        self.note(f"{cause} away")
        try:
            self.wait(OUTAGE_S)
        finally:
            proxy.send_signal(signal.SIGUSR2)
            outage.end = time.monotonic()
            self.note(f"{cause} back")

    def controllers_away(self, watch: PodWatch) -> None:
        from cluster import manifests

        # Read, not copied: the TTL may change (or go) with the fix for finished jobs' outcomes.
        ttl = getattr(manifests, "FINISHED_TTL_S", 3600)
        away_s = ttl / SPEED + CONTROLLERS_AWAY_MARGIN_S
        controllers = [r for r in self.roles.values() if r.name.startswith("controller")]
        for role in controllers:
            role.held = True
            role.kill()
        deleted, start = len(watch.deleted_at), time.monotonic()
        self.note(f"both controllers away for {away_s:.0f} s (TTL {ttl} s = {ttl / SPEED:.0f} s)")
        try:
            self.wait(away_s)
        finally:
            self.while_away = {
                "jobs_finished": watch.ended_between(start, time.monotonic()),
                "pods_deleted": len(watch.deleted_at) - deleted,
            }
            for role in controllers:
                role.held = False
                role.start()
            self.note(
                f"controllers back; meanwhile {self.while_away['jobs_finished']} Jobs finished "
                f"and {self.while_away['pods_deleted']} pods were deleted"
            )

    def timeline(
        self, redis_proxy: subprocess.Popen[Any], pg_proxy: subprocess.Popen[Any], watch: PodWatch
    ) -> None:
        self.at(10)
        self.kill_leader()
        self.at(30)
        self.kill_web()
        self.at(50)
        self.dependency_away("redis", redis_proxy)
        self.at(95)
        self.dependency_away("postgres", pg_proxy)
        self.at(140)
        self.controllers_away(watch)

    def drain(self, clients: list[Client]) -> None:
        """Until every submission is answered and every job has ended, or DRAIN_S."""
        from jobs.models import Job

        until = min(time.monotonic() + DRAIN_S, self.deadline - REPORT_RESERVE_S)
        while time.monotonic() < until:
            answered = not any(c.is_alive() for c in clients)
            if answered and not Job.unscoped.exclude(state__in=TERMINAL).exists():
                break
            self.supervise()
            time.sleep(1.0)
        self.note("drained" if time.monotonic() < until else "drain period over")

    def close(self) -> None:
        self.stop.set()
        for role in self.roles.values():
            role.held = True
            end(role.process)
        for process in reversed(self.helpers):
            end(process)


# -- seeding -----------------------------------------------------------------------------------


def seed() -> list[str]:
    """Teams, GPU types, quotas and a queue through the actions (audited as in production),
    and one user with an API token per client; returns the tokens."""
    from django.contrib.auth.models import User

    from quotas.actions import save_gpu_type, save_queue, set_quota
    from tenants.actions import add_member, create_token, save_team
    from tenants.models import Role as MemberRole

    admin = User.objects.create_superuser("chaos-admin", "admin@example.org", None)
    gpu_types = [
        save_gpu_type(
            acting_user=admin,
            name=name,
            product_label=product,
            memory_gb=80,
            gpus_per_node=GPUS_PER_NODE,
            price_per_gpu_hour=Decimal("1"),
        )
        for name, product in GPU_TYPES.items()
    ]
    teams = []
    for slug in TEAMS:
        team = save_team(acting_user=admin, slug=slug, name=slug.title())
        for gpu_type in gpu_types:
            set_quota(team, gpu_type, guaranteed=GUARANTEED, limit=LIMIT, acting_user=admin)
        save_queue(
            team,
            acting_user=admin,
            name="normal",
            priority=100,
            preemptible=False,
            max_runtime=QUEUE_RUNTIME_S,
        )
        teams.append(team)
    tokens = []
    for client in range(CLIENTS):
        user = User.objects.create_user(f"client{client}", f"client{client}@example.org")
        add_member(teams[client % len(teams)], user, role=MemberRole.MEMBER, acting_user=admin)
        tokens.append(create_token(user, "chaos bench")[1])
    return tokens


# -- the figures -------------------------------------------------------------------------------


def by_cause(answers: list[Answer], outages: list[Outage]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for answer in answers:
        causes = sorted({o.cause for o in outages if o.overlaps(answer.sent, answer.answered)})
        counts["+".join(causes) or "none"] += 1
    return dict(sorted(counts.items()))


def run_figures(submissions: list[Submission], watch: PodWatch) -> tuple[dict[str, Any], list[str]]:
    """Lost, run twice, duplicates and wrong outcomes, from the database and kubesim's pods."""
    from django.db.models import Count, Q

    from jobs.models import Job

    jobs = list(
        Job.unscoped.annotate(running=Count("events", filter=Q(events__to_state="RUNNING"))).values(
            "id", "name", "state", "attempts", "running", "submitted_at"
        )
    )
    by_name: dict[str, list[Any]] = defaultdict(list)
    for job in jobs:
        by_name[job["name"]].append(job)
    lost, wrong, notes, replayed = [], [], [], 0
    for s in submissions:
        found = by_name.get(s.name, [])
        if found and len(s.answers) > 1:
            first = min(j["submitted_at"] for j in found).timestamp()
            replayed += first < s.answers[-1].sent_at  # an earlier attempt had committed
        if s.acknowledged and not any(j["id"] == s.job_id for j in found):
            lost.append(s.name)
            notes.append(f"{s.name}: acknowledged as job {s.job_id}, which is absent")
        elif found and not any(j["state"] in TERMINAL for j in found):
            lost.append(s.name)
            notes.append(f"{s.name}: still {found[0]['state']} after the drain")
        expected = "SUCCEEDED" if s.body["env"]["KUBESIM_EXIT_CODE"] == "0" else "FAILED"
        ended = [j["state"] for j in found if j["state"] in TERMINAL]
        if ended and expected not in ended:
            wrong.append(s.name)
    names = {s.name for s in submissions}
    twice_kube = [j["name"] for j in jobs if len(watch.started.get(j["id"], ())) > 1]
    twice_portal = [j["name"] for j in jobs if j["running"] > 1 or j["attempts"] > 1]
    figures = {
        "jobs_lost": len(lost),
        "jobs_run_twice": len(twice_kube),
        "jobs_run_twice_portal_view": len(twice_portal),
        "duplicate_submissions": sum(len(found) - 1 for found in by_name.values() if found)
        + sum(1 for j in jobs if j["name"] not in names),
        "retried_after_commit": replayed,
        "wrong_outcomes": len(wrong),
        "jobs_in_database": len(jobs),
        "acknowledged": sum(s.acknowledged for s in submissions),
        "not_accepted": sum(1 for s in submissions if not s.acknowledged and not by_name[s.name]),
        "states": dict(Counter(j["state"] for j in jobs)),
    }
    for label, items in (("run twice", twice_kube), ("wrong outcome", wrong)):
        if items:
            notes.append(f"{label}: {', '.join(sorted(items)[:12])}")
    return figures, notes


def requeue_reasons() -> dict[str, int]:
    """Why jobs went back to the queue (or failed) for a lost node or vanished Job."""
    from jobs.models import JobEvent

    reasons = JobEvent.unscoped.filter(to_state="NODE_FAILED").values_list("reason", flat=True)
    return dict(Counter(re.sub(r"\b(job|pod)[-\w]*\d\S*", "\\1 …", r)[:80] for r in reasons))


def logged_exceptions(logs: list[Path]) -> dict[str, int]:
    """Exception classes in the tracebacks these processes logged (chained ones too)."""
    counts: Counter[str] = Counter()
    for log in logs:
        if log.exists():
            for line in log.read_text(errors="replace").splitlines():
                if match := EXCEPTION.match(line):
                    counts[match.group(1)] += 1
    return dict(counts.most_common(12))


def audit_verify(env: dict[str, str]) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [PYTHON, "manage.py", "audit_verify"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "output": "audit_verify did not end within 120 s"}
    output = (done.stdout + done.stderr).strip().splitlines()
    return {"ok": done.returncode == 0, "output": output[-1] if output else ""}


def figures(
    bench: Bench,
    submissions: list[Submission],
    watch: PodWatch,
    sampler: QuotaSampler,
    env: dict[str, str],
) -> dict[str, Any]:
    answers = [a for s in submissions for a in s.answers]
    counted, notes = run_figures(submissions, watch)
    worst: dict[str, int] = defaultdict(int)
    for v in sampler.violations:
        worst[v["quota"]] = max(worst[v["quota"]], v["gpus"])
    return {
        **counted,
        "quota_violations": len(sampler.violations),
        "quota_violations_most_gpus": dict(worst),
        "quota_peaks": {k: f"{sampler.peaks[k]}/{limit}" for k, limit in sampler.limits.items()},
        "quota_samples": sampler.samples,
        "http_5xx_by_cause": by_cause(
            [a for a in answers if a.status is not None and a.status >= 500], bench.outages
        ),
        "connection_errors_by_cause": by_cause(
            [a for a in answers if a.status is None], bench.outages
        ),
        "http_statuses": dict(Counter(str(a.status or a.error) for a in answers)),
        "audit_verify": audit_verify(env),
        "takeover_s": bench.takeover_s,
        "while_controllers_away": bench.while_away,
        "pod_watch_restarts": watch.restarts,
        "requeue_reasons": requeue_reasons(),
        "unplanned_exits": {r.name: r.exits for r in bench.roles.values() if r.exits},
        "web_exceptions_logged": logged_exceptions(
            [r.log for r in bench.roles.values() if r.name.startswith("web")]
        ),
        "controller_exceptions_logged": logged_exceptions(
            [r.log for r in bench.roles.values() if r.name.startswith("controller")]
        ),
        "timeline": bench.events,
        "notes": notes,
        "run_dir": str(bench.dir),
    }


def report(f: dict[str, Any]) -> str:
    def goal(value: object, ok: bool) -> str:
        return f"{value}   {'ok' if ok else 'FAILS the goal'}"

    fives = f["http_5xx_by_cause"]
    lines = [
        f"Chaos bench: {JOBS} jobs from {CLIENTS} clients "
        f"({f['acknowledged']} acknowledged, {f['jobs_in_database']} in the database, "
        f"{f['not_accepted']} never accepted); states {f['states']}",
        f"  jobs lost               {goal(f['jobs_lost'], f['jobs_lost'] == 0)}",
        f"  jobs run twice          {goal(f['jobs_run_twice'], f['jobs_run_twice'] == 0)}"
        f"   (portal's view: {f['jobs_run_twice_portal_view']}; "
        f"pod watch started {f['pod_watch_restarts']} times)",
        f"  duplicate submissions   "
        f"{goal(f['duplicate_submissions'], f['duplicate_submissions'] == 0)}"
        f"   ({f['retried_after_commit']} submissions retried after an attempt had committed)",
        f"  quota violations        {goal(f['quota_violations'], f['quota_violations'] == 0)}"
        f"   ({f['quota_samples']} samples; most held/limit {f['quota_peaks']})"
        + (
            f" most held in violation {f['quota_violations_most_gpus']}"
            if f["quota_violations"]
            else ""
        ),
        f"  5xx by cause            {goal(fives or 0, 'none' not in fives)}"
        + ("   (Redis away should answer none: issue 18 item 4)" if "redis" in fives else ""),
        f"  audit_verify            {goal(f['audit_verify']['output'], f['audit_verify']['ok'])}",
        f"  wrong outcomes          {f['wrong_outcomes']} (end differs from the spec's exit code)",
        f"  connection errors       {f['connection_errors_by_cause'] or 0}",
        f"  answers                 {f['http_statuses']}",
        f"  takeover                {f['takeover_s']} s after the leader's SIGKILL",
        f"  controllers away        {f['while_controllers_away']['jobs_finished']} Jobs finished"
        f" meanwhile, {f['while_controllers_away']['pods_deleted']} pods were deleted",
        f"  requeue reasons         {f['requeue_reasons'] or 'none'}",
        f"  unplanned exits         {f['unplanned_exits'] or 'none'}",
        f"  web logged              {f['web_exceptions_logged'] or 'nothing'}",
        f"  controllers logged      {f['controller_exceptions_logged'] or 'nothing'}",
        "  timeline:",
        *(f"    {event}" for event in f["timeline"]),
        *(f"  note: {note}" for note in f["notes"]),
        f"  role logs: {f['run_dir']}",
    ]
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------------------


def postgres_port() -> int:
    """The port of the bench's database, which must be on 127.0.0.1 (the proxy's only host)."""
    url = urllib.parse.urlsplit(os.environ["DATABASE_URL"])
    if url.hostname != "127.0.0.1":
        raise SystemExit(f"DATABASE_URL: the chaos bench needs 127.0.0.1, not {url.hostname}")
    return url.port or 5432


def role_environment(pg_port: int, redis_port: int, kubeconfig: Path, var: Path) -> dict[str, str]:
    """The roles reach PostgreSQL and Redis only through the proxies."""
    url = urllib.parse.urlsplit(os.environ["DATABASE_URL"])
    userinfo = url.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{pg_port}" if userinfo else f"127.0.0.1:{pg_port}"
    return {
        **os.environ,
        "DATABASE_URL": url._replace(netloc=netloc).geturl(),
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "CACHE_KEY_PREFIX": PREFIX,
        "CHANNEL_PREFIX": PREFIX,
        "KUBECONFIG": str(kubeconfig),
        "PORTAL_VAR_DIR": str(var),
        "PYTHONUNBUFFERED": "1",
    }


def run(bench: Bench) -> dict[str, Any]:
    fresh_database(DATABASE)
    import django

    django.setup()
    tokens = seed()
    redis_port = bench.start_redis()
    redis_proxy, redis_via = bench.start_proxy("redis-proxy", redis_port)
    pg_proxy, pg_via = bench.start_proxy("postgres-proxy", postgres_port())
    server, kubeconfig = bench.start_kubesim()
    watch = PodWatch(server, bench.stop)
    watch.start()
    env = role_environment(pg_via, redis_via, kubeconfig, bench.dir / "var")
    ports = bench.start_roles(env, kubeconfig)
    for port in ports:
        bench.ready(lambda p=port: answers(p, HTTP_PROBE, b"HTTP/"), "web", 120)
    bench.ready(lambda: bench.leader() is not None, "a leading controller", 120)
    submissions = plan()
    bench.t0 = time.monotonic() + 1.0
    clients = [
        Client(tokens[c], ports, submissions[c::CLIENTS], bench.t0, bench.stop, bench.in_flight)
        for c in range(CLIENTS)
    ]
    sampler = QuotaSampler(bench.stop)
    for thread in (*clients, sampler):
        thread.start()
    try:
        bench.timeline(redis_proxy, pg_proxy, watch)
        bench.drain(clients)
    except OutOfTime as exc:
        bench.note(f"out of time: {exc}")
    bench.close()
    for thread in (*clients, sampler, watch):
        thread.join(timeout=60)
    # audit_verify reads the checkpoints the controllers wrote, under the roles' var dir.
    verify_env = {**os.environ, "PORTAL_VAR_DIR": str(bench.dir / "var")}
    return figures(bench, submissions, watch, sampler, verify_env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    use_environment(DATABASE, LOG_LEVEL="WARNING")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # clean up as after Ctrl-C
    bench = Bench(Path(tempfile.mkdtemp(prefix="chaos-")))
    try:
        result = run(bench)
    finally:
        bench.close()
    print(json.dumps(result) if args.json else report(result))


if __name__ == "__main__":
    main()
