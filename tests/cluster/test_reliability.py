"""Outages and restarts: nothing lost, nothing created twice, one leader at a time."""

from __future__ import annotations

import queue
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from cluster import lease
from cluster.controller import Controller
from cluster.kube import KubernetesBackend, load_api_client
from cluster.manifests import LABEL_JOB
from cluster.models import Lease
from cluster.watchers import Seen, Watcher
from jobs.models import State
from kubesim import KubeSim
from tests.cluster.conftest import Cluster, controller_leads

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
    away_until = time.monotonic() + 30
    while time.monotonic() < away_until:  # the controller keeps going, without a cluster
        try:
            cluster.controller.step()
        except Exception as exc:  # a failed list during reconcile is retried next turn
            assert "cluster API" in str(exc)
            time.sleep(0.5)
    assert cluster.state(during) == State.ADMITTED or cluster.state(during) == State.QUEUED
    cluster.sim.start()
    cluster.drive(
        lambda: {cluster.state(running), cluster.state(during)} == {State.SUCCEEDED}, timeout=60
    )
    assert _k8s_jobs_of(cluster, running.pk) == [f"job-{running.pk}-1"]
    assert _k8s_jobs_of(cluster, during.pk) == [f"job-{during.pk}-1"]


def test_a_running_job_whose_job_object_vanishes_runs_again(cluster: Cluster) -> None:
    job = cluster.submit(runtime_s=40)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    cluster.backend.delete_job("gpu-vision", job.k8s_name)  # behind the portal's back

    cluster.drive(lambda: cluster.state(job) == State.RUNNING and job.attempts == 2)
    assert job.events.filter(reason="its Job object vanished from the cluster").exists()
    assert _k8s_jobs_of(cluster, job.pk) == [f"job-{job.pk}-2"]


def test_controller_killed_after_admitting_is_caught_up_by_its_successor(cluster: Cluster) -> None:
    first = cluster.controller
    first._create = lambda job: None  # type: ignore[method-assign]  # dies before telling k8s
    job = cluster.submit(runtime_s=2)
    cluster.drive(lambda: cluster.state(job) == State.ADMITTED)
    assert _k8s_jobs_of(cluster, job.pk) == []
    first.stop_leading()  # killed: the lease is not released, it expires
    Lease.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    second = cluster.new_controller()
    try:
        cluster.drive(lambda: cluster.state(job) == State.SUCCEEDED, controller=second)
        assert _k8s_jobs_of(cluster, job.pk) == [f"job-{job.pk}-1"]
        assert job.attempts == 1
    finally:
        second.stop_leading(release=True)
        second.kube_pool.shutdown(wait=True)


def test_standby_takes_over_within_15_s_and_never_both_lead(cluster: Cluster) -> None:
    leader = cluster.controller
    assert controller_leads(leader)
    standby = cluster.new_controller()
    stop = threading.Event()
    thread = threading.Thread(target=standby.run, args=(stop,), daemon=True)
    thread.start()
    try:
        time.sleep(2)
        assert not standby.leading  # the leader's lease is fresh
        leader.stop_leading()  # the leader dies: no more renewals
        died = time.monotonic()
        while not standby.leading and time.monotonic() - died < 20:
            time.sleep(0.2)
        assert standby.leading and time.monotonic() - died <= 15
        assert not lease.try_acquire(leader.identity)  # the old leader cannot act again
    finally:
        stop.set()
        thread.join(timeout=10)
        standby.kube_pool.shutdown(wait=True)


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


def test_controller_is_a_standby_while_another_leads(cluster: Cluster) -> None:
    assert lease.try_acquire("someone-else")
    other = Controller(cluster.backend)
    stop = threading.Event()
    thread = threading.Thread(target=other.run, args=(stop,), daemon=True)
    thread.start()
    time.sleep(1.5)
    stop.set()
    thread.join(timeout=5)
    assert not other.leading and other.stats.cycles == 0


def test_a_submission_that_commits_after_a_later_one_is_noticed(cluster: Cluster) -> None:
    from jobs.models import Job

    controller = cluster.controller
    late, later = cluster.submit(name="late"), cluster.submit(name="later")
    Job.unscoped.filter(pk=late.pk).update(state=State.CANCELLED)  # not visible as queued yet
    controller._notice_submissions()
    controller._dirty = False
    controller._notice_submissions()
    assert not controller._dirty  # nothing new
    Job.unscoped.filter(pk=late.pk).update(state=State.QUEUED)  # its commit arrives now
    controller._notice_submissions()
    assert controller._dirty
    assert later.pk > late.pk


def test_a_job_whose_creation_the_watch_has_not_reported_yet_is_not_run_again(
    cluster: Cluster,
) -> None:
    job = cluster.submit(runtime_s=40)
    cluster.drive(lambda: cluster.state(job) == State.RUNNING)
    controller = cluster.controller
    # The pods' stream ran ahead of the jobs' stream: the watch's copy lacks the Job.
    controller.cluster_jobs.pop(("gpu-vision", job.k8s_name))
    with controller._writing():
        controller._resync(list(controller.cluster_jobs.values()))

    job.refresh_from_db()
    assert (job.state, job.attempts) == (State.RUNNING, 1)
    assert not job.events.filter(reason="its Job object vanished from the cluster").exists()
    assert _k8s_jobs_of(cluster, job.pk) == [f"job-{job.pk}-1"]
