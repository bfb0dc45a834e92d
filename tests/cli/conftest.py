"""gpuctl against a live portal: uvicorn on a real port, the world's people with API tokens."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from django.contrib.auth.models import User

from cli.main import gpuctl
from tenants.tokens import issue_token
from tests.cli.server import LiveServer
from tests.conftest import World


@dataclass
class Live:
    world: World
    server: LiveServer
    home: Path  # XDG_CONFIG_HOME: gpuctl's config file lives under it

    @property
    def url(self) -> str:
        return self.server.url

    def token(self, user: User) -> str:
        return issue_token(user, "test")[1]

    @property
    def config_file(self) -> Path:
        return self.home / "gpuctl" / "config.yaml"

    def run(
        self,
        *args: str,
        user: User | None = None,
        token: str | None = None,
        url: str | None = None,
        input: str = "",
    ) -> Result:
        """`gpuctl ARGS` in process, with `user`'s new token or `token` in GPUCTL_TOKEN, or as
        the config file says when neither is given."""
        if user is not None:
            token = self.token(user)
        env = {"XDG_CONFIG_HOME": str(self.home), "GPUCTL_URL": url, "GPUCTL_TOKEN": token}
        if token is not None and url is None:
            env["GPUCTL_URL"] = self.url
        return CliRunner().invoke(gpuctl, list(args), env=env, input=input)


@pytest.fixture
def live(world: World, settings: Any, tmp_path: Path) -> Iterator[Live]:
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    with LiveServer() as server:
        yield Live(world, server, tmp_path / "config")
