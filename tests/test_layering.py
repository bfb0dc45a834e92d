"""The dependency direction of DESIGN.md section 3, checked module by module on the source.

Imports under `if TYPE_CHECKING:` load nothing at run time and are not counted.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The Django apps, lowest first: each may import those before it, never one after it. `audit`
# sits just above `base` because every app, `tenants` included, records audit events (rows keep
# plain team and actor ids, no foreign keys). `monitoring` reads the cluster's Node and Gpu rows.
# `portal` is the wiring on top: nothing imports it; `base`, at the bottom, imports no app.
LAYERS = (
    "base",
    "audit",
    "tenants",
    "quotas",
    "jobs",
    "notifications",
    "cluster",
    "monitoring",
    "billing",
    "portal",
)
STANDALONE = ("scheduler", "kubesim", "agent", "cli")
# Whom a standalone package may serve besides the apps: `scheduler` is pure policy every app
# may call; the embedded demo (portal) starts kubesim and the agents in process.
STANDALONE_USERS = {"scheduler": set(LAYERS), "kubesim": {"portal"}, "agent": {"portal"}}

# Upward imports that are still there, each with what it is waiting for. Remove the line with
# the import; a line whose import is gone fails `test_every_known_upward_import_is_still_there`.
KNOWN_UPWARD = {
    ("tenants/api.py", "quotas"): "the member endpoint sets the GPU cap: belongs above quotas",
}

# The Kubernetes client is reached through one adapter; inventory parses Node quantities
# ("1Ti", "96") with the client's own parser rather than a copy of it.
KUBERNETES_MODULES = {"cluster/kube.py", "cluster/inventory.py"}
# pynvml's public API is the agent's; its private loader names only agent/nvml.py touches.
PYNVML_PACKAGE = "agent"
PYNVML_PRIVATE_MODULE = "agent/nvml.py"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST) -> set[str]:
    """Every absolute module name a tree imports, outside `if TYPE_CHECKING:` blocks."""
    names: set[str] = set()
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            pending += node.orelse
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        pending += ast.iter_child_nodes(node)
    return names


@cache
def _modules() -> dict[str, tuple[str, set[str], str]]:
    """{path: (package, imported module names, source)} for every module of ours."""
    found: dict[str, tuple[str, set[str], str]] = {}
    for package in (*LAYERS, *STANDALONE):
        for path in sorted((ROOT / package).rglob("*.py")):
            source = path.read_text()
            imported = _imported(ast.parse(source, str(path)))
            found[str(path.relative_to(ROOT))] = (package, imported, source)
    return found


def _ours(imported: set[str]) -> set[str]:
    return {name.split(".")[0] for name in imported} & {*LAYERS, *STANDALONE}


def _upward_imports() -> set[tuple[str, str]]:
    upward = set()
    for path, (package, imported, _) in _modules().items():
        if package not in LAYERS:
            continue
        allowed = set(LAYERS[: LAYERS.index(package) + 1])
        allowed |= {lib for lib, users in STANDALONE_USERS.items() if package in users}
        upward |= {(path, other) for other in _ours(imported) - allowed}
    return upward


def test_apps_import_only_the_apps_below_them() -> None:
    unexpected = _upward_imports() - KNOWN_UPWARD.keys()
    assert not unexpected, f"imports against DESIGN.md's direction: {sorted(unexpected)}"


def test_every_known_upward_import_is_still_there() -> None:
    assert not KNOWN_UPWARD.keys() - _upward_imports(), "fixed: remove it from KNOWN_UPWARD"


@pytest.mark.parametrize("package", [p for p in STANDALONE if (ROOT / p).exists()])
def test_standalone_packages_import_no_django_and_nothing_of_ours(package: str) -> None:
    for path, (owner, imported, _) in _modules().items():
        if owner == package:
            assert "django" not in {name.split(".")[0] for name in imported}, path
            assert _ours(imported) <= {package}, path


def test_only_the_kubernetes_adapter_imports_kubernetes() -> None:
    importers = {
        path
        for path, (_, imported, _) in _modules().items()
        if any(name.split(".")[0] == "kubernetes" for name in imported)
    }
    assert importers == KUBERNETES_MODULES


def test_only_the_agent_imports_pynvml_and_only_its_hook_touches_pynvml_internals() -> None:
    for path, (package, imported, source) in _modules().items():
        if "pynvml" in {name.split(".")[0] for name in imported}:
            assert package == PYNVML_PACKAGE, path
        if "pynvml._" in source:
            assert path == PYNVML_PRIVATE_MODULE, path


def test_the_check_sees_real_imports() -> None:
    # Guard against a walker that finds nothing: these imports are there for sure.
    modules = _modules()
    assert "django.db" in modules["jobs/models.py"][1]
    assert "tenants.models" in modules["quotas/models.py"][1]
    assert "base/idempotency.py" in modules
