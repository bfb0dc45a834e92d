"""The controller's pool runs the waiting call of the lowest rank first."""

from __future__ import annotations

import threading

import pytest

from cluster.pool import RankedPool


def test_waiting_calls_run_lowest_rank_first_and_equal_ranks_in_order() -> None:
    pool = RankedPool(1, "test")
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def block() -> None:
        started.set()
        release.wait(5)

    pool.submit(block)
    assert started.wait(5)  # the one worker is busy: everything below waits its turn
    for name, rank in (("create 1 GPU", -1), ("create 20 GPUs", -20), ("delete", float("-inf"))):
        pool.submit(ran.append, name, rank=rank)
    pool.submit(ran.append, "create 20 GPUs, later", rank=-20)
    release.set()
    pool.shutdown(wait=True)

    assert ran == ["delete", "create 20 GPUs", "create 20 GPUs, later", "create 1 GPU"]


def test_a_calls_result_or_failure_reaches_its_future() -> None:
    pool = RankedPool(2, "test")

    def fail() -> None:
        raise ValueError("refused")

    try:
        assert pool.submit(sum, [1, 2, 3]).result(timeout=5) == 6
        with pytest.raises(ValueError, match="refused"):
            pool.submit(fail).result(timeout=5)
        assert pool.submit(sum, [4]).result(timeout=5) == 4  # the worker lived on
    finally:
        pool.shutdown(wait=True)
    with pytest.raises(RuntimeError):
        pool.submit(sum, [1])
