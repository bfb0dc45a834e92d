"""`gpuctl logs`: a job's persisted log, or its live tail over the job's websocket."""

from __future__ import annotations

import click

from cli.api import session
from cli.follow import LogFollower
from cli.helptext import examples
from cli.i18n import _

MAX_TAIL = 100_000


@click.command(
    "logs",
    help=_(
        "Print a job's log (kept after its pods are gone). With several pods, each pod's "
        "lines come under a `==> pod <==` header, or prefixed `[pod]` when following.\n\n"
        "With -f the log is followed live until the job has ended (exit code 0 whatever the "
        "job's outcome; `gpuctl get` tells it); a dropped connection is resumed where it "
        "broke, without losing or repeating a line."
    )
    + examples("gpuctl logs 42", "gpuctl logs 42 --tail 100", "gpuctl logs 42 -f --tail 20"),
)
@click.argument("job", type=int)
@click.option("-f", "--follow", is_flag=True, help=_("Keep printing new lines until the job ends."))
@click.option(
    "--tail", type=click.IntRange(1, MAX_TAIL), help=_("Start with the last N lines of each pod.")
)
def logs_command(job: int, follow: bool, tail: int | None) -> None:
    api = session()
    if not follow:
        for piece in api.text(f"jobs/{job}/logs/", tail=tail):
            click.echo(piece, nl=False)
        return
    # Over HTTP first: a missing job, a foreign one or a bad token get their precise message.
    details = api.get(f"jobs/{job}/")
    assert api.token is not None
    follower = LogFollower(
        api.url,
        api.token,
        job,
        write=click.echo,
        tail=tail,
        prefix_pods=details["nodes"] > 1,
    )
    follower.run()
