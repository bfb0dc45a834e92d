"""A copy of `scheduler/` compiled by mypyc, as the production image builds it (decision 0011).

The checkout's own package stays the source; the copy lives in `into`, and a process that has
`into` first on its path (its working directory) runs the compiled one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compile_scheduler(into: Path) -> Path:
    """Copy `scheduler/` into `into` and compile it there (about 35 s); returns `into`."""
    shutil.copytree(
        ROOT / "scheduler", into / "scheduler", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    mypyc = Path(sys.executable).parent / "mypyc"
    built = subprocess.run(
        [str(mypyc), "scheduler/"], cwd=into, capture_output=True, text=True, timeout=900
    )
    if built.returncode != 0:
        raise RuntimeError(f"mypyc failed:\n{built.stdout[-2000:]}{built.stderr[-2000:]}")
    return into
