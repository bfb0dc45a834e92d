"""Backfill: a smaller job may jump a blocked larger one only if it does not delay its start."""

from scheduler import ReasonCode, schedule
from tests.scheduler.builders import NOW, config, job, node, quota, running, snapshot

QUOTAS = [quota("alice-lab", 16, 16), quota("bob-lab", 16, 16)]


def blocked_scene(small_limit: float) -> object:
    # n1 frees its 4 busy GPUs in 600 s; the 8-GPU job waits for it. 4 GPUs are free now.
    busy = running(job(9, "bob-lab", gpus=4, limit=650), {"n1": 4}, started=NOW - 50)
    big = job(1, "alice-lab", gpus=8, submit=NOW - 100)
    small = job(2, "bob-lab", gpus=4, submit=NOW - 10, limit=small_limit)
    return snapshot([big, small], [busy], [node("n1", 4)], QUOTAS)


def test_a_small_job_backfills_when_it_ends_before_the_blocked_job_starts() -> None:
    decisions = schedule(blocked_scene(small_limit=300), config())  # type: ignore[arg-type]
    assert [a.job_id for a in decisions.admissions] == [2]
    assert decisions.pending[1].estimated_start == NOW + 600


def test_a_small_job_may_not_delay_the_blocked_job() -> None:
    decisions = schedule(blocked_scene(small_limit=3600), config())  # type: ignore[arg-type]
    assert decisions.admissions == []
    reason = decisions.pending[2].reason
    assert reason.code is ReasonCode.BACKFILL_BLOCKED
    assert reason.figures == {"blocked_job": 1, "reserved_start": NOW + 600, "wait_s": 600}
    assert reason.message == "would delay job 1, reserved to start in 600 s"
    assert decisions.pending[1].estimated_start == NOW + 600


def test_backfill_uses_free_gpus_the_reservation_does_not_need() -> None:
    busy = running(job(9, "bob-lab", gpus=8, limit=650), {"n1": 8}, started=NOW - 50)
    big = job(1, "alice-lab", gpus=8, submit=NOW - 100)
    long_small = job(2, "bob-lab", gpus=4, submit=NOW - 10, limit=86_400)
    decisions = schedule(
        snapshot([big, long_small], [busy], [node("n1", 0), node("n2", 4)], QUOTAS), config()
    )
    assert [a.job_id for a in decisions.admissions] == [2]
    assert decisions.pending[1].estimated_start == NOW + 600
