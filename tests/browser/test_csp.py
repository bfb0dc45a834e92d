"""In a real browser, under the Content-Security-Policy: the pages work and nothing is refused.

Chromium reports every refused script, style or connection on the console; a page that relied
on inline code would log one there (and lose what that code did).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.test_live_job import CHROMIUM, CHROMIUM_ARGS, Portal, _log_in
from tests.browser.test_live_job import portal as portal  # the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LEAD_PAGES = ["/", "/jobs/new/", "/teams/vision/", "/profile/", "/api/docs/"]
ADMIN_PAGES = ["/cluster/", "/manage/quotas/", "/audit/", "/admin/"]


def _refusals(page: Any) -> list[str]:
    refused: list[str] = []
    page.on(
        "console",
        lambda message: (
            refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return refused


def test_the_pages_work_under_the_content_security_policy(portal: Portal) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            alice = browser.new_page()
            refused = _refusals(alice)
            _log_in(alice, portal.url, "alice")
            for path in LEAD_PAGES:
                alice.goto(f"{portal.url}{path}", wait_until="networkidle")
            alice.wait_for_selector("#swagger-ui .info")  # the docs' script ran
            alice.goto(f"{portal.url}/teams/vision/", wait_until="networkidle")
            widths = alice.eval_on_selector_all(
                "[data-team-usage] .bar span", "spans => spans.map(s => s.style.width)"
            )
            assert widths and all(width.endswith("%") for width in widths)

            admin = browser.new_page()
            refused += _refusals(admin)
            _log_in(admin, portal.url, "admin")
            for path in ADMIN_PAGES:
                admin.goto(f"{portal.url}{path}", wait_until="networkidle")
            assert refused == []
        finally:
            browser.close()
