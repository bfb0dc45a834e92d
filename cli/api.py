"""The REST API over httpx, with every failure turned into a clear message and an exit code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from cli import config
from cli.errors import ERROR, INVALID, NOT_FOUND, CliError
from cli.i18n import _

TIMEOUT_S = 30.0
USER_AGENT = "gpuctl/1"


def _join(field: str, key: str) -> str:
    if key in ("detail", "non_field_errors"):
        return field
    return f"{field}.{key}" if field else key


def field_messages(body: Any, field: str = "") -> list[str]:
    """The API's `{field: [message]}` errors (nested for nested fields) as `field: message`."""
    if isinstance(body, dict):
        return [m for key, value in body.items() for m in field_messages(value, _join(field, key))]
    if isinstance(body, list):
        return [m for item in body for m in field_messages(item, field)]
    return [f"{field}: {body}" if field else str(body)]


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200] or response.reason_phrase
    return "\n".join(field_messages(body))


def failure(response: httpx.Response) -> CliError:
    """What an unsuccessful answer means for the user, and its exit code."""
    code = response.status_code
    if code == 401:
        return CliError(
            _("%(detail)s\nThe token is missing, invalid or expired: run `gpuctl login`.")
            % {"detail": _detail(response)},
            NOT_FOUND,
        )
    if code in (403, 404):
        return CliError(_detail(response), NOT_FOUND)
    if code in (400, 413, 422):
        return CliError(_detail(response), INVALID)
    if code == 429:
        wait = response.headers.get("Retry-After")
        hint = _(" (retry after %(s)s s)") % {"s": wait} if wait else ""
        return CliError(_detail(response) + hint, ERROR)
    request_id = response.headers.get("X-Request-ID", "")
    return CliError(
        _("The portal answered %(code)s %(reason)s (request id %(id)s).")
        % {"code": code, "reason": response.reason_phrase, "id": request_id or "-"},
        ERROR,
    )


class Api:
    """A signed-in session against one portal's `/api/v1/`."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.token = token
        self.http = httpx.Client(base_url=f"{self.url}/api/v1/", headers=headers, timeout=TIMEOUT_S)

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        try:
            yield
        except httpx.TransportError as exc:
            raise CliError(
                _("Cannot reach %(url)s: %(error)s")
                % {"url": self.url, "error": str(exc) or type(exc).__name__}
            ) from exc

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        with self._reaching():
            response = self.http.request(method, path, **kwargs)
        if not response.is_success:
            raise failure(response)
        if not response.content:
            return None
        try:
            return response.json()
        except json.JSONDecodeError as exc:
            raise CliError(
                _("%(url)s did not answer JSON: is it the portal?") % {"url": self.url}
            ) from exc

    def get(self, path: str, **params: Any) -> Any:
        wanted = {key: value for key, value in params.items() if value is not None}
        return self.call("GET", path, params=wanted)

    def post(self, path: str, body: Any = None) -> Any:
        return self.call("POST", path, json=body if body is not None else {})

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path)

    def text(self, path: str, **params: Any) -> Iterator[str]:
        """A text/plain answer, piece by piece as it arrives."""
        wanted = {key: value for key, value in params.items() if value is not None}
        with self._reaching(), self.http.stream("GET", path, params=wanted) as response:
            if not response.is_success:
                response.read()
                raise failure(response)
            yield from response.iter_text()


def session() -> Api:
    """The API as the signed-in user of the config file (or GPUCTL_URL and GPUCTL_TOKEN)."""
    url, token = config.current().signed_in()
    return Api(url, token)
