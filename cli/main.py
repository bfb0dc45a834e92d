"""The `gpuctl` command group.

Exit codes: 0 ok, 1 error (network, server), 2 usage, 3 not found, forbidden or not signed in,
4 refused as invalid (the portal's message per field is printed).
"""

from __future__ import annotations

import click

from cli import auth, cluster, jobs, logs, sweeps, top, usage
from cli.helptext import block, translate_help
from cli.i18n import _

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(
    context_settings=CONTEXT,
    help=_("Submit and follow GPU jobs on the cluster portal.")
    + block(
        _("First sign in (the token is kept in your config file, mode 0600):"),
        "gpuctl login https://portal.example",
    )
    + block(
        _("Then, for example:"),
        "gpuctl submit job.yaml [--dry-run]",
        "gpuctl sweep get 7",
        "gpuctl ls --mine --state queued,running",
        "gpuctl why 42",
        "gpuctl logs 42 -f",
        "gpuctl top 42",
        "gpuctl usage --month 2026-11 --by user",
    )
    + "\n\n"
    + _(
        "GPUCTL_URL and GPUCTL_TOKEN override the config file. Exit codes: 0 ok, 1 error, "
        "2 usage, 3 not found, forbidden or not signed in, 4 refused as invalid. "
        'Shell completion: eval "$(_GPUCTL_COMPLETE=bash_source gpuctl)" (zsh_source, '
        "fish_source)."
    ),
)
@click.version_option(
    "1", prog_name="gpuctl", message="%(prog)s %(version)s", help=_("Show the version and exit.")
)
def gpuctl() -> None:
    pass


for command in (
    *auth.COMMANDS,
    *jobs.COMMANDS,
    *sweeps.COMMANDS,
    logs.logs_command,
    *cluster.COMMANDS,
    *usage.COMMANDS,
    *top.COMMANDS,
):
    gpuctl.add_command(command)
translate_help(gpuctl)


def main() -> None:
    gpuctl(prog_name="gpuctl")
