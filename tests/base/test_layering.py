"""`base` is what every app shares, so it imports none of them (DESIGN.md section 3)."""

from __future__ import annotations

from tests.test_layering import DJANGO_APPS, _imports


def test_base_imports_no_app() -> None:
    found = _imports("base")
    assert "base/idempotency.py" in found  # the walker sees the package
    for path, names in found.items():
        assert not names & DJANGO_APPS, path
