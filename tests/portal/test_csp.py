"""Content-Security-Policy: every page carries one that allows no inline code, and the pages
are written so they work under it (no inline scripts, styles or style attributes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from tests.conftest import World

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
INLINE_IN_TEMPLATES = re.compile(
    r"<style|\sstyle=|<script(?![^>]*\ssrc=)[^>]*>|\son[a-z]+=|javascript:", re.IGNORECASE
)
# Style attributes set from our scripts are refused too; the CSSOM (node.style...) is allowed.
INLINE_IN_SCRIPTS = re.compile(r"""setAttribute\(\s*["']style|\bstyle:\s*[`"']|innerHTML""")


def _policy(response: object) -> str:
    return response["Content-Security-Policy"]  # type: ignore[index]


@pytest.mark.parametrize("path", ["/accounts/login/", "/", "/jobs/", "/api/docs/", "/api/v1/me/"])
def test_every_page_carries_a_policy_without_inline_code(world: World, path: str) -> None:
    client = Client()
    client.force_login(world.bob)
    response = client.get(path)
    assert response.status_code == 200
    policy = _policy(response)
    assert "default-src 'self'" in policy and "object-src 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_the_api_docs_load_their_script_from_a_url(world: World) -> None:
    client = Client()
    client.force_login(world.bob)
    page = client.get("/api/docs/").content.decode()
    assert not INLINE_IN_TEMPLATES.search(page)
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


def test_templates_and_scripts_carry_no_inline_code() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for pattern, paths in (
            (INLINE_IN_TEMPLATES, (ROOT / "templates").rglob("*.html")),
            (INLINE_IN_SCRIPTS, (ROOT / "static" / "js").glob("*.js")),
        )
        for path in paths
        for match in pattern.finditer(path.read_text())
    ]
    assert found == []
