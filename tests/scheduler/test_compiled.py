"""The scheduler compiled by mypyc (the production image runs it) decides as its source does.

A copy of scheduler/ is compiled (about 35 s), a synthetic trace is replayed with it in a
subprocess under every policy, and every job's start, end, preemptions and estimates must equal
those of the same replay on the source here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import tracegen
from bench.compiled import compile_scheduler
from bench.replay import load_trace
from scheduler import Policy, PolicyConfig, _stale_builds
from scheduler.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]
IN_COMPILED = (
    "import json, sys\n"
    "import scheduler, scheduler.cycle\n"
    "from tests.scheduler.test_compiled import replays\n"
    "print(json.dumps([scheduler.COMPILED, scheduler.cycle.__file__, replays(sys.argv[1])]))\n"
)


def replays(trace_dir: str) -> list[list[object]]:
    """Each policy's replay of the trace in `trace_dir`: one row per job."""
    directory = Path(trace_dir)
    trace = load_trace(
        directory / "trace.csv", directory / "cluster.yaml", directory / "quotas.yaml"
    )
    rows: list[list[object]] = []
    for policy in Policy:
        result = simulate(trace, PolicyConfig(policy=policy))
        rows += [
            [policy.value, o.job_id, o.start, o.end, o.preempted, [list(e) for e in o.estimates]]
            for o in result.outcomes
        ]
    return rows


def test_the_compiled_scheduler_decides_and_estimates_as_its_source(tmp_path: Path) -> None:
    tracegen.write(tmp_path / "trace", 1000, seed=7, load=1.2)  # queues, preemptions, gangs
    build = compile_scheduler(tmp_path / "build")
    ran = subprocess.run(
        [sys.executable, "-c", IN_COMPILED, str(tmp_path / "trace")],
        cwd=build,  # first on the path: the compiled package shadows the source's
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    is_compiled, module, rows = json.loads(ran.stdout)

    assert is_compiled and module.startswith(str(build)) and module.endswith(".so")
    expected = json.loads(json.dumps(replays(str(tmp_path / "trace"))))
    assert len(rows) == 3 * 1000
    assert any(row[4] for row in expected), "the trace should make preemptions"
    assert rows == expected


def test_a_compiled_module_older_than_its_source_is_named(tmp_path: Path) -> None:
    suffix = ".cpython-311-x86_64-linux-gnu.so"
    for name in ("cycle", "pool", "queue"):
        (tmp_path / f"{name}.py").write_text("")
        (tmp_path / f"{name}{suffix}").write_bytes(b"")
    os.utime(tmp_path / f"cycle{suffix}", (1_000, 1_000))  # built before its source changed
    (tmp_path / f"orphan{suffix}").write_bytes(b"")  # no source beside it: nothing to compare

    assert _stale_builds(tmp_path) == ["cycle.py"]
    os.utime(tmp_path / f"cycle{suffix}")  # rebuilt
    assert _stale_builds(tmp_path) == []
