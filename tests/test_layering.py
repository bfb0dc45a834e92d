"""The dependency direction of DESIGN.md section 3, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DJANGO_APPS = {"portal", "tenants", "quotas", "jobs", "audit", "cluster", "monitoring", "billing"}
STANDALONE = ("scheduler", "kubesim", "agent", "cli")


def _imports(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def _packages() -> list[str]:
    return [p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name != "tests"]


@pytest.mark.parametrize("package", [p for p in STANDALONE if (ROOT / p).exists()])
def test_standalone_packages_import_no_django_and_nothing_of_ours(package: str) -> None:
    for path, names in _imports(package).items():
        assert "django" not in names, path
        assert not names & DJANGO_APPS, path
    if package == "scheduler":
        ours = set(_packages()) - {"scheduler"}
        for path, names in _imports(package).items():
            assert not names & ours, path


def test_only_cluster_imports_kubernetes_and_only_agent_imports_pynvml() -> None:
    for package in _packages():
        for path, names in _imports(package).items():
            if "kubernetes" in names:
                assert package == "cluster", path
            if "pynvml" in names:
                assert package == "agent", path


def test_the_check_sees_real_imports() -> None:
    # Guard against a walker that finds nothing: jobs imports django for sure.
    assert any("django" in names for names in _imports("jobs").values())
