"""Outages and restarts: nothing lost, nothing created twice, one leader at a time."""

from __future__ import annotations

import queue
import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError
from django.db.models.functions import Now
from django.utils import timezone

from cluster import lease
from cluster.apply import Applied, apply_decisions
from cluster.backend import Obj, Unavailable
from cluster.controller import Controller
from cluster.kube import KubernetesBackend, load_api_client
from cluster.manifests import FINISHED_TTL_S, LABEL_JOB
from cluster.models import Lease
from cluster.watchers import Seen, Watcher
from jobs.models import TERMINAL_STATES, State
from kubesim import KubeSim
from tests.cluster.conftest import FAST, Cluster, audited, controller_leads

pytestmark = pytest.mark.django_db(transaction=True)


def _k8s_jobs_of(cluster: Cluster, job_id: int) -> list[str]:
    return [
        o["metadata"]["name"] for o in cluster.backend.list("jobs", f"{LABEL_JOB}={job_id}").items
    ]


def test_cluster_api_away_for_30_s_then_back(cluster: Cluster) -> None:
    running = cluster.submit(runtime_s=40)
    cluster.drive(lambda: cluster.state(running) == State.RUNNING)
    cluster.sim.stop()
    during = cluster.submit(runtime_s=2, name="submitted-during-outage")
    for _ in range(60):  # 30 s of the controller's clock: it keeps going, without a cluster
        try:
            cluster.controller.step()
        except Unavailable as exc:  # a failed call during a resync is retried next turn
            assert "cluster API" in str(exc)
        cluster.ticks.advance(0.5)
    assert cluster.controller.leading
    assert cluster.state(during) == State.ADMITTED or cluster.state(during) == State.QUEUED
    cluster.sim.start()
    cluster.drive(
        lambda: {cluster.state(running), cluster.state(during)} == {State.SUCCEEDED}, timeout=60
    )
    assert _k8s_jobs_of(cluster, running.pk) == [f"job-{running.pk}-1"]
    assert _k8s_jobs_of(cluster, during.pk) == [f"job-{during.pk}-1"]


def _expire_lease() -> None:
    """The leader's lease runs out, by the database's clock (it stalled, or it died)."""
    Lease.objects.update(expires_at=Now() - timedelta(seconds=1))


def _finished(obj: Obj) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)


@pytest.mark.parametrize(
    ("exit_code", "outcome", "reason"),
    [(0, State.SUCCEEDED, "completed"), (3, State.FAILED, "exit code 3")],
)
def test_a_job_that_ended_while_the_controller_was_away_past_its_ttl_keeps_its_outcome(
    cluster: Cluster, exit_code: int, outcome: str, reason: str
) -> None:
    job = cluster.submit(runtime_s=200, exit_code=exit_code)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    cluster.controller.stop_leading()  # the controller goes away; its lease runs out
    cluster.clock.advance(300)  # the job runs to its end meanwhile
    cluster.sim.call(lambda: None)  # (returns once the simulation has ticked at that time)
    (obj,) = cluster.backend.list("jobs", f"{LABEL_JOB}={job.pk}").items
    assert _finished(obj)
    cluster.clock.advance(FINISHED_TTL_S + 60)  # and the controller stays away past the TTL
    cluster.sim.call(lambda: None)
    _expire_lease()

    successor = cluster.new_controller()  # the controller comes back
    cluster.drive(lambda: cluster.state(job) in TERMINAL_STATES, controller=successor)
    assert (job.state, job.state_reason, job.attempts) == (outcome, reason, 1)
    assert _k8s_jobs_of(cluster, job.pk) in ([f"job-{job.pk}-1"], [])  # never created again
    # Its outcome recorded, the Job gets its TTL, long run out: Kubernetes deletes it now.
    cluster.drive(lambda: _k8s_jobs_of(cluster, job.pk) == [], controller=successor)
    job.refresh_from_db()
    assert (job.state, job.attempts) == (outcome, 1)
    assert [e.to_state for e in job.events.all()] == ["QUEUED", "ADMITTED", "RUNNING", outcome]


def test_a_finished_job_gets_its_ttl_once_its_outcome_is_recorded_after_a_failed_try(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[str] = []

    def unavailable(namespace: str, name: str, ttl_s: int) -> bool:
        tries.append(name)
        raise Unavailable("cluster API: connection refused")

    monkeypatch.setattr(cluster.backend, "expire_job", unavailable)
    job = cluster.submit(runtime_s=2)
    cluster.drive(lambda: bool(tries))  # tried once the outcome was recorded; the API was away
    assert cluster.state(job) == State.SUCCEEDED
    (obj,) = cluster.backend.list("jobs", f"{LABEL_JOB}={job.pk}").items
    assert "ttlSecondsAfterFinished" not in obj["spec"]  # created without one: kept till then
    monkeypatch.undo()  # the API is back: the next reconciliation sets it

    def ttl() -> object:
        (obj,) = cluster.backend.list("jobs", f"{LABEL_JOB}={job.pk}").items
        return obj["spec"].get("ttlSecondsAfterFinished")

    cluster.drive(lambda: ttl() == FINISHED_TTL_S)


def test_a_running_job_whose_job_object_is_deleted_fails_with_its_outcome_unknown(
    cluster: Cluster,
) -> None:
    job = cluster.submit(runtime_s=400)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    cluster.backend.delete_job("gpu-vision", job.k8s_name)  # behind the portal's back

    cluster.drive(lambda: cluster.state(job) in TERMINAL_STATES)
    assert (job.state, job.attempts) == (State.FAILED, 1)
    assert job.state_reason.startswith("outcome unknown: its Job was deleted from the cluster")
    assert _k8s_jobs_of(cluster, job.pk) == []  # not run again
    assert audited(job)[-1] == ("job.failed", cluster.world.vision.pk)


def test_controller_killed_after_admitting_is_caught_up_by_its_successor(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = cluster.controller
    monkeypatch.setattr(cluster.backend, "create_job", lambda obj: True)  # dies before telling
    job = cluster.submit(runtime_s=2)
    cluster.drive(lambda: cluster.state(job) == State.ADMITTED)
    assert _k8s_jobs_of(cluster, job.pk) == []
    monkeypatch.undo()
    first.stop_leading()  # killed: the lease is not released, it expires
    Lease.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    second = cluster.new_controller()
    cluster.drive(lambda: cluster.state(job) == State.SUCCEEDED, controller=second)
    assert _k8s_jobs_of(cluster, job.pk) == [f"job-{job.pk}-1"]
    assert job.attempts == 1


def _asking_for_the_lease(
    monkeypatch: pytest.MonkeyPatch, holder: str
) -> tuple[list[bool], threading.Event]:
    """What `holder` was answered each time it asked for the lease; the event is set on each."""
    answers: list[bool] = []
    asked = threading.Event()
    acquire = lease.try_acquire

    def answered(who: str) -> bool:
        taken = acquire(who)
        if who == holder:
            answers.append(taken)
            asked.set()
        return taken

    monkeypatch.setattr(lease, "try_acquire", answered)
    return answers, asked


def test_a_standby_takes_over_once_the_leaders_lease_runs_out_and_never_both_lead(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader = cluster.controller
    assert controller_leads(leader)
    standby = cluster.new_controller()
    answers, asked = _asking_for_the_lease(monkeypatch, standby.identity)
    stop = threading.Event()
    thread = threading.Thread(target=standby.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert asked.wait(30)
        assert answers[0] is False  # the leader's lease is fresh
        leader.stop_leading()  # the leader dies: no more renewals
        _expire_lease()  # and its lease runs out
        asked.clear()
        while not answers[-1]:  # the standby's next ask takes the lease
            assert asked.wait(30), "the standby stopped asking for the lease"
            asked.clear()
        assert not lease.try_acquire(leader.identity)  # the old leader cannot act again
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


def test_a_standby_whose_clock_runs_ahead_cannot_take_a_fresh_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert lease.try_acquire("leader")
    ahead = timezone.now() + timedelta(hours=1)
    monkeypatch.setattr(timezone, "now", lambda: ahead)  # this host's clock is an hour fast

    assert not lease.try_acquire("standby")
    assert Lease.objects.get().holder == "leader"


def test_a_stalled_leader_applies_no_admission_once_its_standby_has_taken_over(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    stalled, standby = cluster.controller, cluster.new_controller()
    job = cluster.submit(runtime_s=2)
    assert controller_leads(stalled)

    def stall_then_apply(*args: Any, **kwargs: Any) -> Applied:
        # Between deciding and applying, the leader stalls past its lease; the standby leads.
        _expire_lease()
        assert controller_leads(standby)
        return apply_decisions(*args, **kwargs)

    monkeypatch.setattr("cluster.scheduling.apply_decisions", stall_then_apply)
    stalled.step()  # its cycle decides to admit the job
    monkeypatch.undo()

    assert not stalled.leading and stalled.stats.admitted == 0
    assert cluster.state(job) == State.QUEUED  # nothing of the stale decision was applied
    cluster.drive(lambda: cluster.state(job) == State.SUCCEEDED, controller=standby)
    assert job.attempts == 1 and _k8s_jobs_of(cluster, job.pk) == [f"job-{job.pk}-1"]
    assert [action for action, _ in audited(job)].count("job.admit") == 1


def test_a_stalled_leader_applies_no_watch_report_once_its_standby_has_taken_over(
    cluster: Cluster,
) -> None:
    stalled = cluster.new_controller(timing=replace(FAST, renew_every_s=3600))  # renews no more
    job = cluster.submit(runtime_s=400)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING, controller=stalled)
    _expire_lease()
    assert controller_leads(cluster.new_controller())  # the standby leads
    (obj,) = cluster.backend.list("jobs", f"{LABEL_JOB}={job.pk}").items
    obj["status"]["conditions"] = [{"type": "Complete", "status": "True"}]

    stalled.intake.seen.put(Seen("jobs", "MODIFIED", obj))  # its watch reports the job's end
    stalled.step()

    assert not stalled.leading
    assert cluster.state(job) == State.RUNNING  # the stale leader applied nothing


def test_a_410_on_watch_leads_to_a_relist(tmp_path: object) -> None:
    sim = KubeSim(history_size=20)
    sim.start()
    try:
        sim.write_kubeconfig(f"{tmp_path}/kubeconfig")
        backend = KubernetesBackend(load_api_client(f"{tmp_path}/kubeconfig"))
        old = backend.list("nodes").resource_version
        for i in range(40):  # push the old resourceVersion out of the watch history
            backend.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"n{i}"}})
        seen: queue.Queue[Seen] = queue.Queue()
        stop = threading.Event()
        watcher = Watcher(backend, "nodes", "", old, seen, stop)
        watcher.start()
        relist = seen.get(timeout=10)
        stop.set()
        assert relist.type == "RELIST" and len(relist.items) == 12
        assert watcher.relists == 1 and watcher.resource_version != old
    finally:
        sim.stop()


def test_controller_is_a_standby_while_another_leads(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert lease.try_acquire("someone-else")
    other = Controller(cluster.backend)
    answers, asked = _asking_for_the_lease(monkeypatch, other.identity)
    stop = threading.Event()
    thread = threading.Thread(target=other.run, args=(stop,), daemon=True)
    thread.start()
    while len(answers) < 2:  # it keeps asking, and is refused
        assert asked.wait(30), "the standby stopped asking for the lease"
        asked.clear()
    stop.set()
    thread.join(timeout=30)
    assert answers[:2] == [False, False]
    assert not other.leading and other.stats.cycles == 0


def test_a_standby_outlives_the_database_going_away(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop, tries = threading.Event(), []

    def try_acquire(holder: str) -> bool:
        tries.append(holder)
        if len(tries) == 1:
            raise OperationalError("the database went away")
        stop.set()
        return False

    monkeypatch.setattr(lease, "try_acquire", try_acquire)
    standby = Controller(cluster.backend)
    standby.run(stop)  # returns once stopped; the database error did not end it
    assert len(tries) == 2 and not standby.leading


def test_a_submission_that_commits_after_a_later_one_is_noticed(cluster: Cluster) -> None:
    from jobs.models import Job

    scheduling = cluster.controller.scheduling
    late, later = cluster.submit(name="late"), cluster.submit(name="later")
    Job.unscoped.filter(pk=late.pk).update(state=State.CANCELLED)  # not visible as queued yet
    assert scheduling.notice_submissions()
    assert not scheduling.notice_submissions()  # nothing new
    Job.unscoped.filter(pk=late.pk).update(state=State.QUEUED)  # its commit arrives now
    assert scheduling.notice_submissions()
    assert later.pk > late.pk


def test_a_job_whose_creation_the_watch_has_not_reported_yet_is_not_run_again(
    cluster: Cluster,
) -> None:
    job = cluster.submit(runtime_s=40)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    controller = cluster.controller
    # The pods' stream ran ahead of the jobs' stream: the watch's copy lacks the Job.
    controller.intake.cluster_jobs.pop(("gpu-vision", job.k8s_name))
    controller.resync()

    job.refresh_from_db()
    assert (job.state, job.attempts) == (State.RUNNING, 1)
    assert not job.events.filter(reason="its Job object vanished from the cluster").exists()
    assert _k8s_jobs_of(cluster, job.pk) == [f"job-{job.pk}-1"]
