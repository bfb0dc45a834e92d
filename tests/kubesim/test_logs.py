"""Synthetic logs: what a follower reads piece by piece is what a plain read returns."""

from __future__ import annotations

from kubesim.logs import Run, lines, next_line_at


def _all(run: Run, now: float) -> list[tuple[float, str]]:
    return list(lines("seed", "main", "node-0", [0, 1], run, now))


def test_lines_after_a_time_continue_a_read_without_gap_or_repeat() -> None:
    run = Run(started=1000.25, ends=1007.5, exit_code=0, finished=1007.5)
    read, sent, now = [], 1000.0, 1000.0
    while now < 1010:
        now = next_line_at(run, sent) if now < run.finished else now + 1
        fresh = list(lines("seed", "main", "node-0", [0, 1], run, now, after=sent))
        read += fresh
        sent = fresh[-1][0] if fresh else sent
    assert read == _all(run, 1010)
    assert read[-1][1] == "training finished" and len(read) == 9


def test_next_line_is_the_next_step_or_the_end() -> None:
    run = Run(started=100.0, ends=102.5, exit_code=0)
    assert next_line_at(run, 100.0) == 101.0
    assert next_line_at(run, 101.7) == 102.0
    assert next_line_at(run, 102.0) == 102.5
    assert next_line_at(run, 103.0) == 104.0  # past its end, not yet stopped: lines go on
