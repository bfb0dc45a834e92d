"""`pip install .` gives the `gpuctl` command with the dependencies the portal pins."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pins(path: Path) -> set[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {line.lower() for line in lines if line and not line.startswith("-r")}


def test_the_packages_dependencies_are_the_pins_of_requirements_txt() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {d.lower() for d in project["dependencies"]} <= _pins(ROOT / "requirements.txt")


def test_the_gpuctl_script_names_the_clis_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    module, _colon, function = project["scripts"]["gpuctl"].partition(":")
    assert callable(getattr(importlib.import_module(module), function))
