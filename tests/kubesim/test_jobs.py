"""The Job controller as the portal relies on it: completion, indexes, failure reasons, deletion."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, watch

from kubesim import ManualClock, default_cluster
from kubesim.resources import JOB, NAMESPACE
from kubesim.sim import Simulation
from tests.kubesim.conftest import job_manifest, wait_for

INDEX = "batch.kubernetes.io/job-completion-index"


def _conditions(
    batch: client.BatchV1Api, namespace: str, name: str
) -> dict[str, client.V1JobCondition]:
    job = batch.read_namespaced_job(name, namespace)
    return {c.type: c for c in job.status.conditions or [] if c.status == "True"}


def _pods(core: client.CoreV1Api, namespace: str, job: str) -> list[client.V1Pod]:
    return core.list_namespaced_pod(
        namespace, label_selector=f"batch.kubernetes.io/job-name={job}"
    ).items


def test_job_runs_its_pod_to_complete(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    batch.create_namespaced_job(namespace, job_manifest("done", runtime=2))
    wait_for(lambda: "Complete" in _conditions(batch, namespace, "done"), what="Complete")
    job = batch.read_namespaced_job("done", namespace)
    assert job.status.succeeded == 1 and job.status.completion_time is not None
    (pod,) = _pods(core, namespace, "done")
    assert pod.status.phase == "Succeeded" and pod.metadata.labels["job-name"] == "done"
    assert pod.metadata.owner_references[0].uid == job.metadata.uid
    reasons = {e.reason for e in core.list_namespaced_event(namespace).items}
    assert {"SuccessfulCreate", "Scheduled", "Started", "Completed"} <= reasons


def test_first_status_write_already_counts_the_new_pod(
    batch: client.BatchV1Api, namespace: str
) -> None:
    listed = batch.list_namespaced_job(namespace).metadata.resource_version
    batch.create_namespaced_job(namespace, job_manifest("counted", runtime=1))
    wait_for(lambda: "Complete" in _conditions(batch, namespace, "counted"), what="Complete")
    statuses = [
        e["object"].status
        for e in watch.Watch().stream(
            batch.list_namespaced_job, namespace, resource_version=listed, timeout_seconds=1
        )
        if e["type"] == "MODIFIED"
    ]
    assert statuses[0].active == 1 and statuses[0].start_time is not None
    assert statuses[-1].succeeded == 1 and not statuses[-1].active


def test_indexed_job_gives_each_pod_an_index_and_hostname(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    manifest = job_manifest(
        "idx", runtime=2, completionMode="Indexed", completions=3, parallelism=3
    )
    batch.create_namespaced_job(namespace, manifest)
    wait_for(lambda: len(_pods(core, namespace, "idx")) == 3, what="three pods")
    pods = _pods(core, namespace, "idx")
    assert sorted(p.metadata.annotations[INDEX] for p in pods) == ["0", "1", "2"]
    assert sorted(p.spec.hostname for p in pods) == ["idx-0", "idx-1", "idx-2"]
    wait_for(lambda: "Complete" in _conditions(batch, namespace, "idx"), what="Complete")
    assert batch.read_namespaced_job("idx", namespace).status.completed_indexes == "0-2"


def test_failing_pods_exhaust_the_backoff_limit(batch: client.BatchV1Api, namespace: str) -> None:
    batch.create_namespaced_job(
        namespace, job_manifest("boom", runtime=1, exit_code=3, backoffLimit=1)
    )
    conditions = wait_for(
        lambda: (
            _conditions(batch, namespace, "boom").get("Failed")
            and _conditions(batch, namespace, "boom")
        ),
        timeout=20,
        what="Failed",
    )
    assert conditions["Failed"].reason == "BackoffLimitExceeded"
    assert batch.read_namespaced_job("boom", namespace).status.failed == 2


def test_active_deadline_fails_a_long_job(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    batch.create_namespaced_job(
        namespace, job_manifest("slow", runtime=600, activeDeadlineSeconds=5)
    )
    failed = wait_for(lambda: _conditions(batch, namespace, "slow").get("Failed"), what="deadline")
    assert failed.reason == "DeadlineExceeded"
    wait_for(lambda: not _pods(core, namespace, "slow"), what="pods removed")


def test_suspended_job_creates_no_pods_until_resumed(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    batch.create_namespaced_job(namespace, job_manifest("held", runtime=1, suspend=True))
    wait_for(lambda: "Suspended" in _conditions(batch, namespace, "held"), what="Suspended")
    assert _pods(core, namespace, "held") == []
    batch.patch_namespaced_job("held", namespace, {"spec": {"suspend": False}})
    wait_for(lambda: "Complete" in _conditions(batch, namespace, "held"), what="Complete")


def test_parallel_job_runs_pods_side_by_side(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    batch.create_namespaced_job(
        namespace, job_manifest("par", runtime=3, parallelism=2, completions=4)
    )
    wait_for(
        lambda: batch.read_namespaced_job("par", namespace).status.active == 2, what="two active"
    )
    wait_for(
        lambda: "Complete" in _conditions(batch, namespace, "par"), timeout=15, what="Complete"
    )
    assert batch.read_namespaced_job("par", namespace).status.succeeded == 4


def test_finished_job_is_deleted_after_its_ttl(batch: client.BatchV1Api, namespace: str) -> None:
    batch.create_namespaced_job(
        namespace, job_manifest("ttl", runtime=1, ttlSecondsAfterFinished=2)
    )
    wait_for(lambda: not batch.list_namespaced_job(namespace).items, what="ttl deletion")


def test_background_deletion_removes_the_jobs_pods(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    batch.create_namespaced_job(namespace, job_manifest("bg", runtime=600))
    wait_for(lambda: _pods(core, namespace, "bg"), what="pod")
    batch.delete_namespaced_job("bg", namespace, propagation_policy="Background")
    wait_for(lambda: not _pods(core, namespace, "bg"), what="pods deleted")


def test_foreground_deletion_keeps_the_job_until_pods_are_gone(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    batch.create_namespaced_job(namespace, job_manifest("fg", runtime=600))
    wait_for(lambda: _pods(core, namespace, "fg"), what="pod")
    batch.delete_namespaced_job("fg", namespace, propagation_policy="Foreground")
    job = batch.read_namespaced_job("fg", namespace)
    assert (
        job.metadata.deletion_timestamp is not None
        and "foregroundDeletion" in job.metadata.finalizers
    )
    wait_for(lambda: not batch.list_namespaced_job(namespace).items, what="job gone")
    assert _pods(core, namespace, "fg") == []


def test_deleting_a_job_without_policy_orphans_its_pods(
    core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str
) -> None:
    batch.create_namespaced_job(namespace, job_manifest("orphan", runtime=600))
    wait_for(lambda: _pods(core, namespace, "orphan"), what="pod")
    batch.delete_namespaced_job("orphan", namespace)
    assert batch.list_namespaced_job(namespace).items == []
    (pod,) = _pods(core, namespace, "orphan")
    assert pod.metadata.owner_references is None and pod.metadata.deletion_timestamp is None


MERGE = "application/merge-patch+json"


@pytest.fixture
def manual() -> tuple[Simulation, ManualClock]:
    """The simulation in-process on a clock that moves only when the test says so."""
    clock = ManualClock()
    sim = Simulation(default_cluster(), clock)
    sim.api.create(NAMESPACE, "", {"metadata": {"name": "lab"}})
    return sim, clock


def _after(sim: Simulation, clock: ManualClock, seconds: float) -> None:
    for _ in range(int(seconds)):
        sim.tick()
        clock.advance(1.0)
    sim.tick()


def _job(sim: Simulation, name: str) -> dict[str, Any] | None:
    stored = sim.store.get(JOB.key, "lab", name)
    return stored.copy() if stored is not None else None


def test_a_ttl_set_after_the_job_finished_deletes_it(
    manual: tuple[Simulation, ManualClock],
) -> None:
    sim, clock = manual
    sim.api.create(JOB, "lab", job_manifest("kept", runtime=1))
    _after(sim, clock, 600)  # finished long ago; without a TTL it stays
    assert _job(sim, "kept") is not None
    sim.api.patch(JOB, "lab", "kept", {"spec": {"ttlSecondsAfterFinished": 60}}, MERGE)
    _after(sim, clock, 1)  # its TTL, counted from its end, has long run out
    assert _job(sim, "kept") is None


def test_a_ttl_removed_before_it_ran_out_keeps_the_job(
    manual: tuple[Simulation, ManualClock],
) -> None:
    sim, clock = manual
    sim.api.create(JOB, "lab", job_manifest("kept", runtime=1, ttlSecondsAfterFinished=30))
    _after(sim, clock, 10)
    sim.api.patch(JOB, "lab", "kept", {"spec": {"ttlSecondsAfterFinished": None}}, MERGE)
    _after(sim, clock, 60)  # the TTL-after-finished controller reads the Job before it acts
    assert _job(sim, "kept") is not None


def test_a_finalizer_keeps_a_job_past_its_ttl_until_it_is_removed(
    manual: tuple[Simulation, ManualClock],
) -> None:
    sim, clock = manual
    manifest = job_manifest("held", runtime=1, ttlSecondsAfterFinished=5)
    manifest["metadata"]["finalizers"] = ["example.org/outcome"]
    sim.api.create(JOB, "lab", manifest)
    _after(sim, clock, 30)
    held = _job(sim, "held")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["example.org/outcome"]  # foreground's is done
    assert any(c["type"] == "Complete" for c in held["status"]["conditions"])
    sim.api.patch(JOB, "lab", "held", {"metadata": {"finalizers": None}}, MERGE)
    assert _job(sim, "held") is None
