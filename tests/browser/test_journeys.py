"""The three roles' journeys in Chromium, in English and in Chinese (issue 23): each step
asserts what the person sees; a screenshot of each step is kept under the test's tmp_path.

The expected words come from the portal's own catalogs (`gettext` under the page's language),
and the Chinese run also checks that they are not the English ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.utils import translation

from jobs.models import State
from tests.browser.test_live_job import CHROMIUM, CHROMIUM_ARGS, Portal, _log_in
from tests.browser.test_live_job import portal as portal  # the fixture

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]
LANGUAGES = ["en", "zh-hans"]


def words(language: str, text: str) -> str:
    with translation.override(language):
        return translation.gettext(text)


class Journey:
    """One person's browser page, in one language, that keeps a screenshot of every step."""

    def __init__(self, page: Any, url: str, language: str, shots: Path) -> None:
        self.page, self.url, self.language, self.shots = page, url, language, shots
        self.step = 0

    def state(self, code: str) -> str:
        """A job state as the pages label it in this language."""
        with translation.override(self.language):
            return str(State(code).label)

    def t(self, text: str) -> str:
        found = words(self.language, text)
        if self.language != "en":
            assert found != text, f"no translation of {text!r}"
        return found

    def go(self, path: str) -> Any:
        return self.page.goto(f"{self.url}{path}")

    def shot(self, name: str) -> None:
        self.step += 1
        self.page.screenshot(path=str(self.shots / f"{self.step:02d}-{name}.png"), full_page=True)

    def sees(self, text: str, selector: str = "main") -> None:
        from playwright.sync_api import expect

        expect(self.page.locator(selector).first).to_contain_text(text, timeout=30_000)


@pytest.fixture
def browser(portal: Portal, settings: Any) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _journey(browser: Any, portal: Portal, who: str, language: str, tmp_path: Path) -> Journey:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    _log_in(page, portal.url, who)
    shots = tmp_path / f"{who}-{language}"
    shots.mkdir()
    journey = Journey(page, portal.url, language, shots)
    if language != "en":  # the header's switcher, remembered for the user
        page.click(f"header button[name=language][value={language}]")
        page.wait_for_selector(f"html[lang={language}]")
    return journey


def _fill_job(page: Any, **fields: str) -> None:
    for name, value in fields.items():
        selector = f"[name={name}]"
        if name == "gpu_type":
            page.select_option(selector, value)
        else:
            page.fill(selector, value)


@pytest.mark.parametrize("language", LANGUAGES)
def test_researcher_submits_fixes_watches_clones_and_cancels(
    browser: Any, portal: Portal, language: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    me = _journey(browser, portal, "bob", language, tmp_path)
    page = me.page
    me.go("/jobs/new/")
    _fill_job(
        page,
        name="Bad_Name",
        image="nvcr.io/nvidia/pytorch:24.05-py3",
        command="python train.py",
        gpu_type="h100-80g",
        gpus_per_node="16",
        queue="nope",
        env="KUBESIM_RUNTIME_SECONDS=900\nKUBESIM_GPU_UTIL=85",
    )
    # The dry run, before submitting: the problem beside its field.
    expect(page.locator("#id_name_error")).to_contain_text("DNS", timeout=30_000)
    expect(page.locator("[data-preview]")).to_have_attribute("data-state", "invalid")
    me.shot("preview-errors")
    page.click("form[data-job-form] button[type=submit]")
    expect(page.locator("#id_gpus_per_node_error")).to_contain_text("16 ")
    expect(page.locator("#id_queue_error")).to_contain_text("nope")
    expect(page.locator("#id_name_error")).not_to_be_empty()
    me.sees(me.t("GPUs per node"), "label[for=id_gpus_per_node]")
    me.shot("all-errors-at-once")

    _fill_job(page, name="walk-job", gpus_per_node="2", queue="")
    page.locator("[name=memory]").focus()  # a change event: the preview asks again
    # No node is known before the controller runs: the dry run tells why it would wait.
    preview = page.locator("[data-preview]")
    expect(preview).to_have_attribute("data-state", re.compile("starts|waits"), timeout=30_000)
    me.sees("h100-80g", "[data-preview]")
    me.shot("preview-fits")
    page.click("form[data-job-form] button[type=submit]")
    page.wait_for_url("**/jobs/*/")
    job_url = page.url
    expect(page.locator("#job-state")).to_have_text(me.state("QUEUED"))

    portal.start_controller()
    expect(page.locator("#job-state")).to_have_text(me.state("RUNNING"), timeout=60_000)
    history = page.locator("[data-job-history]")
    expect(history).to_contain_text(me.state("RUNNING"), timeout=10_000)
    expect(page.locator("[data-live-status]")).to_have_attribute("data-state", "live")
    me.shot("running-live")

    page.click(f"a:has-text('{me.t('Clone and edit')}')")
    expect(page.locator("[name=name]")).to_have_value("walk-job")
    page.fill("[name=name]", "walk-job-2")
    page.click("form[data-job-form] button[type=submit]")
    page.wait_for_url("**/jobs/*/")
    assert page.url != job_url
    me.sees("walk-job-2", "h1")
    me.shot("clone-submitted")

    page.click("form[data-cancel] button")
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_be_visible()
    me.shot("cancel-asks")
    dialog.locator("[data-confirm-yes]").click()
    expect(page.locator("#job-state")).to_have_text(me.state("CANCELLED"), timeout=30_000)
    me.shot("cancelled")

    me.go("/manage/teams/")  # not hers: told what is missing, no admin login
    me.sees(me.t("This page is for platform admins; your account is not one."))
    assert "/admin/login" not in page.url


@pytest.mark.parametrize("language", LANGUAGES)
def test_lead_manages_members_caps_queues_and_sees_usage(
    browser: Any, portal: Portal, language: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    me = _journey(browser, portal, "alice", language, tmp_path)
    page = me.page
    me.go("/teams/vision/")
    me.sees("bob")
    row = page.locator("tr", has=page.locator("input[name=max_gpus]")).filter(has_text="bob")
    row.locator("input[name=max_gpus]").fill("4")
    row.locator("form.inline button").click()
    expect(page.locator("input[name=max_gpus]").nth(1)).to_have_value("4")
    me.shot("cap-set")

    mine = page.locator("tr").filter(has_text="alice").first
    mine.locator("select[name=role]").select_option("member")
    mine.locator("form.inline button").click()
    me.sees(me.t("%(user)s is the last lead of team %(team)s: make another member a lead first")
            % {"user": "alice", "team": "vision"}, ".messages")  # fmt: skip
    me.shot("last-lead-kept")

    add = page.locator("form[action$='/queues/']").last
    add.locator("input[name=name]").fill("night")
    add.locator("button").click()
    delete = page.locator("form[action*='/queues/'][data-confirm]").filter(
        has=page.locator("button[aria-label*=night]")
    )
    delete.locator("button").click()
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_contain_text("night")
    me.shot("delete-queue-asks")
    dialog.locator("[data-confirm-yes]").click()
    expect(page.locator("input[value=night]")).to_have_count(0)
    me.shot("queue-deleted")

    me.sees("h100-80g", "[data-team-usage]")  # the team's GPUs against its quota, live
    me.sees(me.t("GPUs against quota"), "[data-team-live] h2")
    me.go("/usage/")
    me.sees(me.t("GPU-hours"))
    me.shot("usage")

    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    me.go("/jobs/")
    expect(page.locator("#main-nav")).to_be_hidden()
    page.click("[data-nav-toggle]")
    expect(page.locator("#main-nav")).to_be_visible()
    width = page.eval_on_selector("html", "html => html.scrollWidth")
    assert width <= 390, width  # wide tables scroll inside their card, not the page
    me.shot("phone")


@pytest.mark.parametrize("language", LANGUAGES)
def test_admin_sees_teams_quotas_nodes_and_verifies_the_audit_chain(
    browser: Any, portal: Portal, language: str, tmp_path: Path
) -> None:
    portal.start_controller()  # it inventories the nodes
    me = _journey(browser, portal, "admin", language, tmp_path)
    page = me.page
    for _attempt in range(60):  # the node page is no live page: look again until they came
        me.go("/manage/nodes/")
        if page.locator("form[action*='/cordon/']").count():
            break
        page.wait_for_timeout(500)
    for path, heading, expected in (
        ("/manage/teams/", "Teams", "vision"),
        ("/manage/quotas/", "Quotas", "h100-80g"),
        ("/manage/nodes/", "Nodes", "h100"),
    ):
        me.go(path)
        me.sees(me.t(heading), "h1")
        me.sees(expected)
        me.shot(path.strip("/").replace("/", "-"))
    me.go("/audit/")
    page.click(f"button:has-text('{me.t('Verify the chain')}')")
    me.sees(me.t("The audit chain is intact."), "[data-verdict]")
    me.sees("audit chain OK", "[data-verdict]")
    me.shot("audit-verified")
    response = me.go("/audit/?since=2026-13-45")
    assert response is not None and response.status == 400
    me.sees(me.t("The filters were not applied: fix the field marked."))
    me.shot("audit-bad-date")
