"""The controller's thread pool for creates and deletes: lowest rank first."""

from __future__ import annotations

import pytest

from cluster.pool import RankedPool
from tests.cluster.conftest import blocked


def test_waiting_calls_run_lowest_rank_first_and_equal_ranks_in_order() -> None:
    pool = RankedPool(1, "test")
    ran: list[str] = []
    release = blocked(pool)
    for rank, name in [(3.0, "c"), (1.0, "a1"), (2.0, "b"), (1.0, "a2")]:
        pool.submit((rank,), ran.append, name)
    release.set()
    pool.shutdown(wait=True)
    assert ran == ["a1", "a2", "b", "c"]


def test_a_call_cancelled_while_waiting_never_runs() -> None:
    pool = RankedPool(1, "test")
    ran: list[str] = []
    release = blocked(pool)
    cancelled = pool.submit((1.0,), ran.append, "cancelled")
    kept = pool.submit((2.0,), ran.append, "kept")
    assert cancelled.cancel()
    release.set()
    kept.result(10)
    pool.shutdown(wait=True)
    assert ran == ["kept"]


def test_results_and_errors_reach_the_future() -> None:
    pool = RankedPool(2, "test")
    assert pool.submit((1.0,), pow, 2, 10).result(10) == 1024
    with pytest.raises(ZeroDivisionError):
        pool.submit((1.0,), divmod, 1, 0).result(10)
    pool.shutdown(wait=True)


def test_shutdown_runs_what_waits_and_refuses_more() -> None:
    pool = RankedPool(1, "test")
    ran: list[str] = []
    release = blocked(pool)
    pool.submit((5.0,), ran.append, "waiting")
    pool.shutdown(wait=False)
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit((1.0,), ran.append, "late")
    release.set()
    pool.shutdown(wait=True)
    assert ran == ["waiting"]
