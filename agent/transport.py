"""How a batch reaches the portal: an HTTP POST with the node's token, or anything alike."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

SAMPLES_PATH = "/api/v1/agent/samples/"
TIMEOUT_SECONDS = 10


class TransportError(Exception):
    """The batch did not arrive; `retry` says whether sending it again may help."""

    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


class Transport(Protocol):
    def post(self, batch: dict[str, Any]) -> None: ...


class HttpTransport:
    """POSTs JSON to the portal; the token is read on every post, so a rotation needs no restart."""

    def __init__(self, portal_url: str, token: Callable[[], str]) -> None:
        self._url = portal_url.rstrip("/") + SAMPLES_PATH
        self._token = token

    def post(self, batch: dict[str, Any]) -> None:
        request = urllib.request.Request(
            self._url,
            data=json.dumps(batch).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self._token()}",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS):
                return
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode(errors="replace")
            # A rejected batch stays rejected; a token, rate or server problem may pass.
            retry = exc.code in (401, 403, 408, 429) or exc.code >= 500
            raise TransportError(f"HTTP {exc.code}: {detail}", retry=retry) from None
        except (urllib.error.URLError, OSError) as exc:
            raise TransportError(str(exc), retry=True) from None


def token_file_reader(path: str) -> Callable[[], str]:
    def read() -> str:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()

    return read
