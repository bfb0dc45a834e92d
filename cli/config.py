"""Where gpuctl keeps the portal URL and the personal API token.

The file is YAML in the user's config directory (`~/.config/gpuctl/config.yaml` on Linux), written
with mode 0600 since it holds a credential. `GPUCTL_URL` and `GPUCTL_TOKEN` override it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from cli.errors import NOT_FOUND, USAGE, CliError
from cli.i18n import _

APP = "gpuctl"


@dataclass(frozen=True)
class Settings:
    url: str | None
    token: str | None
    username: str | None

    def signed_in(self) -> tuple[str, str]:
        """(url, token), or a clear error when either is missing."""
        if not self.url:
            raise CliError(_("No portal URL: run `gpuctl login URL` or set GPUCTL_URL."), USAGE)
        if not self.token:
            raise CliError(
                _("Not signed in to %(url)s: run `gpuctl login` or set GPUCTL_TOKEN.")
                % {"url": self.url},
                NOT_FOUND,
            )
        return self.url, self.token


def config_path() -> Path:
    return Path(click.get_app_dir(APP)) / "config.yaml"


def stored() -> dict[str, Any]:
    """What the config file holds; empty when there is none."""
    try:
        data = yaml.safe_load(config_path().read_text())
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as exc:
        message = _("Cannot read %(path)s: %(error)s") % {"path": config_path(), "error": exc}
        raise CliError(message) from exc
    return data if isinstance(data, dict) else {}


def current() -> Settings:
    data = stored()
    return Settings(
        url=os.environ.get("GPUCTL_URL") or data.get("url"),
        token=os.environ.get("GPUCTL_TOKEN") or data.get("token"),
        username=data.get("username"),
    )


def store(data: dict[str, Any]) -> Path:
    """Replace the config file, readable by its owner only (even for a moment)."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkstemp creates the file with mode 0600; the rename keeps it and never leaves half a file.
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as file:
            yaml.safe_dump(data, file, sort_keys=False)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
