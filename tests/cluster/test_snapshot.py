"""The scheduler's snapshot of the queue, kept between cycles, reads what changed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.snapshot import PolicyTables, QueuedRequests
from jobs.actions import cancel_job, submit_job
from jobs.models import Job, State
from jobs.spec import parse_spec
from quotas.models import Quota
from scheduler.queue import QueueIndex
from tests.cluster.conftest import SteppedClock
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db


def _submit(world: World, **overrides: object) -> int:
    return submit_job(world.vision, parse_spec(spec(**overrides)), acting_user=world.bob).pk


def test_it_sees_new_jobs_and_forgets_those_that_left_the_queue(world: World) -> None:
    queue = QueuedRequests()
    first, second = _submit(world, name="first"), _submit(world, name="second")
    assert [r.id for r in queue.current()] == [first, second]

    cancel_job(_job(first), acting_user=world.bob)
    third = _submit(world, name="third", gpus_per_node=2)
    requests = queue.current()
    assert [r.id for r in requests] == [second, third]
    assert (requests[1].team, requests[1].member, requests[1].gpus) == ("vision", "bob", 2)


def test_a_queues_new_priority_reaches_its_waiting_jobs(world: World) -> None:
    queue = QueuedRequests()
    job_id = _submit(world)
    assert queue.current()[0].priority == 100
    world.vision_normal.priority, world.vision_normal.preemptible = 150, True
    world.vision_normal.save()
    [request] = queue.current()
    assert (request.id, request.priority, request.preemptible) == (job_id, 150, True)


def test_a_cycle_reads_whole_rows_only_of_jobs_it_has_not_seen(world: World) -> None:
    queue = QueuedRequests()
    for i in range(5):
        _submit(world, name=f"job-{i}")
    queue.current()
    with CaptureQueriesContext(connection) as queries:
        queue.current()
    assert len(queries) == 2  # the queues' priorities and (a short queue) every queued id
    assert all("owner" not in q["sql"] and "auth_user" not in q["sql"] for q in queries)


def _kept(
    world: World, monkeypatch: pytest.MonkeyPatch, *, recent: int, jobs: int
) -> tuple[QueuedRequests, list[int]]:
    """A queue whose newest `recent` ids are read each time, and `jobs` submitted jobs."""
    monkeypatch.setattr("cluster.snapshot.RECENT_IDS", recent)
    return QueuedRequests(), [_submit(world, name=f"job-{i}") for i in range(jobs)]


def test_older_jobs_are_checked_not_read_while_nothing_moved_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue, jobs = _kept(world, monkeypatch, recent=2, jobs=6)
    queue.current()
    newer = _submit(world, name="newer")
    with CaptureQueriesContext(connection) as queries:
        assert [r.id for r in queue.current()] == [*jobs, newer]
    # The older four are counted, not read: ids are read only above the newest known but two,
    # and a whole row only for the new job.
    sql = [q["sql"] for q in queries if "jobs_job" in q["sql"]]
    assert len(sql) == 3
    assert "COUNT(*)" in sql[0]
    assert f'"jobs_job"."id" > {jobs[-1] - 2}' in sql[1]
    assert f'"jobs_job"."id" IN ({newer})' in sql[2]


def test_what_moves_older_jobs_is_caught_by_the_checksum(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue, jobs = _kept(world, monkeypatch, recent=2, jobs=6)
    queue.current()

    cancel_job(_job(jobs[0]), acting_user=world.bob)  # older than the newest ids
    assert [r.id for r in queue.current()] == jobs[1:]

    Job.unscoped.filter(pk__in=jobs[1:3]).update(state=State.ADMITTED)
    queue.left(jobs[1:3])  # as the controller reports its admissions
    assert [r.id for r in queue.current()] == jobs[3:]

    Job.unscoped.filter(pk=jobs[1]).update(state=State.QUEUED)  # requeued: back among the old
    assert [r.id for r in queue.current()] == [jobs[1], *jobs[3:]]

    Job.unscoped.filter(pk=jobs[3]).update(state=State.ADMITTED)  # admitted, left untold
    requests = queue.current()
    assert [r.id for r in requests] == [jobs[1], *jobs[4:]]
    assert _streams(queue.index) == _streams(QueueIndex.from_jobs(requests))


def test_a_job_the_controller_puts_back_in_the_queue_is_read_by_itself(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue, jobs = _kept(world, monkeypatch, recent=2, jobs=6)
    Job.unscoped.filter(pk=jobs[0]).update(state=State.ADMITTED)
    queue.left([jobs[0]])
    assert [r.id for r in queue.current()] == jobs[1:]

    Job.unscoped.filter(pk=jobs[0]).update(state=State.QUEUED)  # preempted, back in the queue
    queue.returned([jobs[0]])
    with CaptureQueriesContext(connection) as queries:
        requests = queue.current()

    assert [r.id for r in requests] == jobs
    assert _streams(queue.index) == _streams(QueueIndex.from_jobs(requests))
    sql = [q["sql"] for q in queries if "jobs_job" in q["sql"]]
    assert f'"jobs_job"."id" IN ({jobs[0]})' in sql[0]  # its row, then as in a quiet cycle:
    assert "COUNT(*)" in sql[1] and len(sql) == 3  # the checksum held; no id read in full


def test_a_submission_that_commits_late_below_the_newest_ids_is_found(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue, jobs = _kept(world, monkeypatch, recent=1, jobs=4)
    Job.unscoped.filter(pk=jobs[1]).update(state=State.ADMITTED)  # not visible yet
    assert [r.id for r in queue.current()] == [jobs[0], *jobs[2:]]
    Job.unscoped.filter(pk=jobs[1]).update(state=State.QUEUED)  # its commit, long after
    requests = queue.current()
    assert [r.id for r in requests] == jobs
    assert _streams(queue.index) == _streams(QueueIndex.from_jobs(requests))


def test_the_kept_index_matches_one_built_afresh(world: World) -> None:
    queue = QueuedRequests()
    jobs = [_submit(world, name=f"job-{i}", gpus_per_node=1 + i % 2) for i in range(4)]
    queue.current()
    cancel_job(_job(jobs[1]), acting_user=world.bob)  # leaves
    Job.unscoped.filter(pk=jobs[2]).update(state=State.ADMITTED)  # leaves, then comes back
    queue.current()
    Job.unscoped.filter(pk=jobs[2]).update(state=State.QUEUED)
    late = _submit(world, name="late")
    world.vision_normal.priority = 150  # every waiting job moves up
    world.vision_normal.save()

    requests = queue.current()
    assert [r.id for r in requests] == [jobs[0], jobs[2], jobs[3], late]
    assert _streams(queue.index) == _streams(QueueIndex.from_jobs(requests))
    assert {r.priority for s in queue.index.sorted_streams() for r in s.jobs} == {150}


def _streams(index: QueueIndex) -> list[tuple[object, ...]]:
    return [
        (
            stream.key,
            [job.id for job in stream.jobs],
            stream.gpus.min(),
            stream.gpus_per_node.min(),
            stream.submit_time.min(),
        )
        for stream in index.sorted_streams()
    ]


def _job(job_id: int) -> Job:
    return Job.unscoped.get(pk=job_id)


def test_policy_tables_are_read_again_once_they_are_older_than_asked(world: World) -> None:
    clock = SteppedClock()
    kept = PolicyTables(max_age_s=60, clock=clock)
    before = kept.current()
    Quota.unscoped.filter(team=world.vision).update(limit=24)

    clock.advance(59.9)
    with CaptureQueriesContext(connection) as queries:
        assert kept.current() == before  # within its age: no query, the old limit
    assert len(queries) == 0
    clock.advance(0.1)
    limits = {(q.team, q.gpu_type): q.limit for q in kept.current()[1]}
    assert limits["vision", "h100-80g"] == 24


def test_queued_requests_are_read_afresh_every_refresh_on_the_clock(world: World) -> None:
    clock = SteppedClock()
    queue = QueuedRequests(clock)
    job = _submit(world)
    assert [r.member for r in queue.current()] == ["bob"]
    User.objects.filter(username="bob").update(username="robert")
    clock.advance(QueuedRequests.REFRESH_S - 0.1)
    assert [r.member for r in queue.current()] == ["bob"]  # kept: the row is not read again
    clock.advance(0.1)
    assert [(r.id, r.member) for r in queue.current()] == [(job, "robert")]


def test_nodes_show_their_free_gpus_after_what_the_portal_placed_there(world: World) -> None:
    from django.utils import timezone

    from cluster.models import Node
    from cluster.snapshot import build_snapshot

    Node.objects.create(
        name="n1", gpu_type=world.h100, gpu_allocatable=8, rack="r1", nvlink_domain="d1", ready=True
    )
    Node.objects.create(name="n2", gpu_type=world.h100, gpu_allocatable=8, cordoned=True)
    Node.objects.create(name="cpu-only", gpu_type=None, gpu_allocatable=0, ready=True)
    placed = _job(_submit(world, gpus_per_node=3))
    Job.unscoped.filter(pk=placed.pk).update(
        state=State.ADMITTED, placement={"n1": 3}, admitted_at=timezone.now()
    )

    nodes = {n.name: n for n in build_snapshot(timezone.now(), {}).nodes}
    assert set(nodes) == {"n1", "n2"}  # a node without GPUs is not the scheduler's
    n1, n2 = nodes["n1"], nodes["n2"]
    assert (n1.gpu_type, n1.total_gpus, n1.free_gpus) == ("h100-80g", 8, 5)
    assert n1.labels == {"rack": "r1", "nvlink_domain": "d1"} and n1.schedulable
    assert (n2.free_gpus, n2.cordoned, n2.schedulable) == (8, True, False)


def test_the_snapshot_says_what_a_node_has_installed_and_how_often_a_job_was_stopped(
    world: World,
) -> None:
    from django.utils import timezone

    from cluster.models import Gpu, Node
    from cluster.snapshot import build_snapshot

    node = Node.objects.create(
        name="n1", gpu_type=world.h100, gpu_capacity=8, gpu_allocatable=8, ready=True
    )
    Gpu.objects.create(node=node, index=3, healthy=False)
    again = _job(_submit(world))
    Job.unscoped.filter(pk=again.pk).update(attempts=2)  # admitted twice, stopped twice
    running = _job(_submit(world))
    Job.unscoped.filter(pk=running.pk).update(
        state=State.RUNNING, placement={"n1": 1}, attempts=3, admitted_at=timezone.now()
    )

    snapshot = build_snapshot(timezone.now(), {})
    (n1,) = snapshot.nodes
    # An unhealthy GPU is out of what can be placed now, not out of what could ever fit.
    assert (n1.total_gpus, n1.free_gpus, n1.installed_gpus) == (7, 6, 8)
    assert {r.id: r.restarts for r in snapshot.queued} == {again.pk: 2}
    assert [r.job.restarts for r in snapshot.running] == [2]  # on its third attempt
