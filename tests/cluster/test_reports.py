"""Taking in watch reports: which reports need their job's row, and that the rest cost none."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditHead
from cluster import lease
from cluster.apply import admit
from cluster.manifests import LABEL_JOB
from cluster.models import Node
from cluster.observe import job_may_move, pod_may_move, pod_signature, writing
from cluster.watchers import Seen
from jobs.models import Job
from tests.cluster.conftest import FAST, Cluster


def _pod(job_id: int, name: str, phase: str, exit_code: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": exit_code}}}]
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-vision",
            "labels": {LABEL_JOB: str(job_id), "batch.kubernetes.io/job-name": f"job-{job_id}-1"},
        },
        "spec": {"nodeName": "node-a"},
        "status": status,
    }


def _job(job_id: int, condition: str | None = None) -> dict[str, Any]:
    conditions = [{"type": condition, "status": "True"}] if condition else []
    return {
        "kind": "Job",
        "metadata": {
            "name": f"job-{job_id}-1",
            "namespace": "team-vision",
            "labels": {LABEL_JOB: str(job_id)},
        },
        "status": {"conditions": conditions},
    }


def test_only_a_start_an_end_or_a_loss_can_move_a_job() -> None:
    assert not pod_may_move(pod_signature(_pod(1, "p", "Pending")))
    assert pod_may_move(pod_signature(_pod(1, "p", "Running")))
    assert pod_may_move(pod_signature(_pod(1, "p", "Failed", exit_code=3)))
    assert pod_may_move(pod_signature(_pod(1, "p", "Pending", exit_code=1)))
    assert not job_may_move((False, False))
    assert job_may_move((True, False)) and job_may_move((False, True))


def test_a_batch_locks_only_the_jobs_its_reports_may_move(cluster: Cluster) -> None:
    controller = cluster.controller
    batch = [
        Seen("pods", "ADDED", _pod(1, "job-1-1-0", "Pending")),
        Seen("jobs", "ADDED", _job(2)),
        Seen("pods", "MODIFIED", _pod(3, "job-3-1-0", "Running")),
        Seen("jobs", "MODIFIED", _job(4, "Complete")),
        Seen("pods", "DELETED", _pod(5, "job-5-1-0", "Succeeded")),
        Seen("pods", "MODIFIED", _pod(6, "job-6-1-0", "Running")),
        Seen("nodes", "MODIFIED", {"metadata": {"name": "node-a"}}),
    ]
    # Job 6's pod was already seen running: the same state again moves nothing.
    assert lease.try_acquire(controller.identity)  # only the leader takes reports in
    controller.intake.seen.put(Seen("pods", "MODIFIED", _pod(6, "job-6-1-0", "Running")))
    controller.intake.drain(0.0)

    assert controller.intake.moving(batch) == {3, 4}


def test_reports_that_move_nothing_read_no_job(cluster: Cluster) -> None:
    job = cluster.submit()
    controller = cluster.controller
    assert lease.try_acquire(controller.identity)  # only the leader takes reports in
    controller.intake.seen.put(Seen("jobs", "ADDED", _job(job.pk)))
    controller.intake.seen.put(Seen("pods", "ADDED", _pod(job.pk, f"job-{job.pk}-1-0", "Pending")))

    with CaptureQueriesContext(connection) as queries:
        controller.intake.drain(0.0)

    assert controller.stats.counts == {"jobs.ADDED": 1, "pods.ADDED": 1}
    assert [q["sql"] for q in queries if Job._meta.db_table in q["sql"]] == []
    assert f"job-{job.pk}-1-0" in controller.intake.pods[f"job-{job.pk}-1"]


def test_the_pause_after_a_cycle_holds_only_while_reports_wait(
    cluster: Cluster, monkeypatch: Any
) -> None:
    import cluster.scheduling as module

    controller = cluster.new_controller(timing=replace(FAST, cycle_every_s=3600.0))
    cluster.drive(lambda: Node.objects.count() == 12, controller=controller)
    decide = module.decide

    def slow(*args: Any, explain: bool) -> Any:
        cluster.ticks.advance(1.0)  # a long cycle: changes wait up to 1 s more for the next
        return decide(*args, explain=explain)

    monkeypatch.setattr(module, "decide", slow)
    monkeypatch.setattr(controller.intake, "drain", lambda wait_s: None)  # reports stay waiting
    controller.cycle()
    cycles = controller.stats.cycles
    report = Seen("nodes", "MODIFIED", {"metadata": {"name": "node-a"}})
    controller.intake.seen.put(report)
    cluster.submit()  # a change: a cycle is due, once the pause allows

    cluster.ticks.advance(FAST.debounce_s)  # (the next poll notices the submission)
    controller.step()
    assert controller.stats.cycles == cycles  # reports wait: the loop takes them in first
    controller.intake.seen.get_nowait()
    cluster.ticks.advance(FAST.debounce_s)
    controller.step()
    assert controller.stats.cycles == cycles + 1  # none wait: a pause would leave GPUs idle


def test_a_batch_locks_the_audit_head_only_after_its_other_writes(cluster: Cluster) -> None:
    """Every submission waits for the chain's head: a batch takes it last, once its (largest)
    writes are sent, and holds it from there to its commit."""
    jobs = [cluster.submit() for _ in range(3)]
    assert lease.try_acquire("leader")
    with CaptureQueriesContext(connection) as queries, writing("leader") as locked:
        locked.lock([job.pk for job in jobs])
        for job in jobs:
            admit(locked.get(job.pk), {"node-a": 1}, locked.moves)

    writes = [  # writes and locks: the head is taken by SELECT ... FOR UPDATE
        sql
        for sql in (q["sql"] for q in queries)
        if not sql.startswith(("SELECT", "SAVEPOINT")) or "FOR UPDATE" in sql
    ]
    head = next(i for i, sql in enumerate(writes) if AuditHead._meta.db_table in sql)
    assert any(sql.startswith('UPDATE "jobs_job"') for sql in writes[:head]), writes
    assert not any(Job._meta.db_table in sql for sql in writes[head:]), writes
    states = Job.unscoped.filter(pk__in=[job.pk for job in jobs]).values_list("state", flat=True)
    assert list(states) == ["ADMITTED"] * 3  # and all of it went in
