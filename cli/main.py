"""The `gpuctl` command group.

Exit codes: 0 ok, 1 error (network, server), 2 usage, 3 not found, forbidden or not signed in,
4 refused as invalid (the portal's message per field is printed).
"""

from __future__ import annotations

import click

from cli import auth, cluster, jobs, logs, sweeps, top, usage

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option("1", prog_name="gpuctl", message="%(prog)s %(version)s")
def gpuctl() -> None:
    """Submit and follow GPU jobs on the cluster portal.

    \b
    First sign in (the token is kept in your config file, mode 0600):
      gpuctl login https://portal.example
    then, for example:
      gpuctl submit job.yaml [--dry-run]
      gpuctl sweep get 7
      gpuctl ls --mine --state queued,running
      gpuctl why 42
      gpuctl logs 42 -f
      gpuctl top 42
      gpuctl usage --month 2026-11 --by user

    GPUCTL_URL and GPUCTL_TOKEN override the config file. Exit codes: 0 ok, 1 error,
    2 usage, 3 not found, forbidden or not signed in, 4 refused as invalid.
    Shell completion: eval "$(_GPUCTL_COMPLETE=bash_source gpuctl)" (zsh_source, fish_source).
    """


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


def main() -> None:
    gpuctl(prog_name="gpuctl")
