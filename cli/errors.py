"""Errors gpuctl reports, each with the exit code scripts can rely on."""

from __future__ import annotations

import click

OK = 0
ERROR = 1  # network, server, anything else
USAGE = 2  # click's own code for a wrong command line
NOT_FOUND = 3  # not found, forbidden, or not signed in
INVALID = 4  # the portal refused what was sent, with a message per field


class CliError(click.ClickException):
    """A message for stderr and an exit code."""

    def __init__(self, message: str, exit_code: int = ERROR) -> None:
        super().__init__(message)
        self.code = exit_code

    @property
    def exit_code(self) -> int:  # type: ignore[override]  # click's is per class, ours per error
        return self.code
