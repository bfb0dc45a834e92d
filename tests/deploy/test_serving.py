"""The web role serves pages and the REST API through WSGI (gunicorn), the ws role websockets
and the agents' endpoint through ASGI (uvicorn): one code base, one path layout for the proxy."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import httpx
import pytest

from monitoring import endpoint
from portal.routing import websocket_urlpatterns
from tests.deploy.conftest import ROOT, Obj, find

ENTRYPOINT = ROOT / "deploy" / "image" / "entrypoint.sh"


def _ws_prefixes(rendered: list[Obj]) -> list[str]:
    (rule,) = find(rendered, "Ingress", "portal")["spec"]["rules"]
    paths = rule["http"]["paths"]
    return [p["path"] for p in paths if p["backend"]["service"]["name"] == "portal-ws"]


def test_what_only_asgi_serves_is_routed_to_ws(rendered: list[Obj]) -> None:
    prefixes = _ws_prefixes(rendered)
    served_by_asgi = [endpoint.PATH, *("/" + str(r.pattern) for r in websocket_urlpatterns)]
    for path in served_by_asgi:
        assert any(path.startswith(prefix) for prefix in prefixes), path


@pytest.mark.django_db  # a request's start checks the database connections it finds
def test_the_wsgi_application_answers_pages_and_probes() -> None:
    from portal.wsgi import application

    answers: list[str] = []

    def start_response(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
        answers.append(status)

    environ: dict[str, Any] = {"PATH_INFO": "/healthz"}
    setup_testing_defaults(environ)
    body = b"".join(application(environ, start_response))
    assert answers == ["200 OK"] and body == b"ok"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(("role", "server"), [("web", "gunicorn"), ("ws", "uvicorn")])
def test_each_http_role_starts_from_the_entry_point(role: str, server: str, tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_WORKERS": "1",
        "PORTAL_VAR_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
    }
    process = subprocess.Popen(
        ["sh", str(ENTRYPOINT), role], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        answer = _first_answer(f"http://127.0.0.1:{port}/healthz", process)
        assert answer.status_code == 200 and answer.text == "ok"
        with open(f"/proc/{process.pid}/cmdline", "rb") as cmdline:
            assert server.encode() in cmdline.read()  # the entry point exec'd its server
    finally:
        process.terminate()
        process.wait(timeout=30)


def _first_answer(url: str, process: subprocess.Popen[str]) -> httpx.Response:
    # A bound for a broken start, not a measure: the server answers within seconds.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            return httpx.get(url, timeout=2)
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer")
