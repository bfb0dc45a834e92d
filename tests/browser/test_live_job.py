"""In a real browser: bob submits a job with the form and watches it run, live; carol cannot.

Playwright drives Debian's Chromium against the whole portal on a live ASGI server (websockets
included), with the controller, kubesim and the node agents running, as in `make demo`.
Without Chromium the test is skipped, unless REQUIRE_BROWSER=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tests.conftest import PASSWORD, World

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless=new",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _require_chromium() -> None:
    if Path(CHROMIUM).exists() or shutil.which("chromium"):
        return
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail("REQUIRE_BROWSER=1 but Debian's chromium is not installed")
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Portal:
    url: str
    start_controller: Callable[[], object]


@pytest.fixture
def portal(world: World, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Portal]:
    """The whole portal: kubesim, agents and uvicorn serving the ASGI app; the test starts the
    controller when it wants jobs to move (before that, a submitted job can only be QUEUED)."""
    _require_chromium()
    # Playwright's sync API runs an event loop in this thread; the ORM calls made here are
    # ordinary blocking ones.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    from portal import roles

    stop = threading.Event()
    sim = roles.start_cluster(speed=20)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(
        uvicorn.Config("portal.asgi:application", host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    threading.Thread(target=roles.start_agents, args=(sim, url, stop, 1.0), daemon=True).start()
    controllers: list[threading.Thread] = []
    try:
        yield Portal(url, lambda: controllers.append(roles.start_controller(stop)))
    finally:
        stop.set()
        # The controller gives its lease back as it stops: joined before the test's database
        # is emptied, or it could renew the lease after, and the next test's controller would
        # stand by until the lease expired.
        for controller in controllers:
            controller.join(timeout=30)
        server.should_exit = True
        thread.join(timeout=10)
        sim.stop()


def _log_in(page: Any, url: str, username: str) -> None:
    page.goto(f"{url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")


def test_bob_watches_his_job_run_live_and_carol_cannot_open_it(portal: Portal) -> None:
    from playwright.sync_api import expect, sync_playwright

    url = portal.url
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            bob = browser.new_page()
            _log_in(bob, url, "bob")
            bob.goto(f"{url}/jobs/new/")
            bob.fill("input[name=name]", "live-in-browser")
            bob.fill("input[name=image]", "nvcr.io/nvidia/pytorch:24.05-py3")
            bob.fill("input[name=command]", "python train.py")
            bob.select_option("select[name=gpu_type]", "h100-80g")
            bob.fill("input[name=gpus_per_node]", "2")
            bob.fill("textarea[name=env]", "KUBESIM_RUNTIME_SECONDS=900\nKUBESIM_GPU_UTIL=85")
            bob.click("form.card button[type=submit]")
            bob.wait_for_url("**/jobs/*/")
            job_url = bob.url
            loads: list[str] = []
            bob.on("load", lambda page: loads.append(page.url))
            assert bob.inner_text("#job-state") == "Queued"
            portal.start_controller()
            # Locators, not wait_for_function: that evaluates a string in the page, which the
            # Content-Security-Policy refuses (no 'unsafe-eval').
            expect(bob.locator("#job-state")).to_have_text("Running", timeout=60_000)
            bob.locator("[data-gpu-table] tr").nth(1).wait_for(timeout=60_000)
            assert "%" in bob.inner_text("[data-gpu-table]")
            bob.locator("[data-log-output] .line").nth(2).wait_for(timeout=60_000)
            assert "loss=" in bob.inner_text("[data-log-output]")
            assert loads == [] and bob.url == job_url  # all of it arrived without a reload

            carol = browser.new_page()
            _log_in(carol, url, "carol")
            response = carol.goto(job_url)
            assert response is not None and response.status == 404
            assert "live-in-browser" not in carol.content()
        finally:
            browser.close()
