"""`gpuctl top`: a job's GPUs now (utilisation, memory, temperature, power), live.

The first figures come from `/api/v1/jobs/<id>/metrics/` (each GPU's newest sample); then each
`job.metrics` message on the job's websocket replaces its GPUs' figures, until the job ends.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import click
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from cli.api import Api, session
from cli.errors import ERROR, NOT_FOUND, CliError
from cli.follow import RETRY_DELAYS_S, TERMINAL_STATES, job_socket
from cli.helptext import examples
from cli.i18n import _
from cli.output import table

SAMPLE_FIELDS = {
    "util": "DCGM_FI_DEV_GPU_UTIL",
    "fb_used": "DCGM_FI_DEV_FB_USED",
    "fb_total": "DCGM_FI_DEV_FB_TOTAL",
    "temp": "DCGM_FI_DEV_GPU_TEMP",
    "power": "DCGM_FI_DEV_POWER_USAGE",
}
"""The websocket's short names for the agent's field names, which the metrics API keeps."""
HISTORY_HOURS = 1  # the portal keeps a GPU's newest sample this long
MIB_PER_GIB = 1024

Readings = dict[tuple[str, int], dict[str, Any]]  # (node, index) -> newest figures


def _latest(metrics: dict[str, Any]) -> Readings:
    readings: Readings = {}
    for gpu in metrics["gpus"]:
        if sample := gpu["latest"]:
            figures = {short: sample.get(name) for short, name in SAMPLE_FIELDS.items()}
            readings[(gpu["node"], gpu["index"])] = {"at": sample.get("at"), **figures}
    return readings


def _number(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.0f}{unit}"


def _memory(reading: dict[str, Any]) -> str:
    used, total = reading.get("fb_used"), reading.get("fb_total")
    if used is None or total is None:
        return "-"
    return f"{used / MIB_PER_GIB:.1f}/{total / MIB_PER_GIB:.1f}"


def _at(reading: dict[str, Any]) -> str:
    at = reading.get("at")
    return "-" if at is None else time.strftime("%H:%M:%S", time.gmtime(at))


def top_table(job: int, state: str, readings: Readings) -> str:
    rows = [
        [
            node,
            index,
            _number(r.get("util"), "%"),
            _memory(r),
            _number(r.get("temp")),
            _number(r.get("power")),
            _at(r),
        ]
        for (node, index), r in sorted(readings.items())
    ]
    headers = [_("NODE"), _("GPU"), _("UTIL"), _("MEMORY GIB"), _("TEMP °C"), _("POWER W")]
    text = _("job %(job)s: %(state)s") % {"job": job, "state": state}
    if not rows:
        return text + "\n" + _("No GPU figures yet.")
    return text + "\n\n" + table([*headers, _("AT (UTC)")], rows)


class Watch:
    """Redraws the table on each message of the job's websocket until the job has ended, or
    until it has drawn `count` tables."""

    def __init__(
        self, api: Api, job: int, state: str, readings: Readings, count: int | None = None
    ) -> None:
        assert api.token is not None
        self.url, self.token, self.job = api.url, api.token, job
        self.state, self.readings = state, readings
        self.tables_left = count

    @property
    def done(self) -> bool:
        return self.state in TERMINAL_STATES or self.tables_left == 0

    def run(self) -> None:
        failures = 0
        while not self.done:
            try:
                with job_socket(self.url, self.token, self.job) as ws:
                    for raw in ws:
                        failures = 0
                        self._take(json.loads(raw))
                        if self.done:
                            return
            except InvalidStatus as exc:
                raise CliError(
                    _("The portal refused the live figures of job %(job)s (HTTP %(status)s).")
                    % {"job": self.job, "status": exc.response.status_code},
                    NOT_FOUND,
                ) from exc
            except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed) as exc:
                if failures >= len(RETRY_DELAYS_S):
                    raise CliError(
                        _("Lost the live figures of job %(job)s: %(error)s")
                        % {"job": self.job, "error": str(exc) or type(exc).__name__},
                        ERROR,
                    ) from exc
                time.sleep(RETRY_DELAYS_S[failures])
                failures += 1

    def _take(self, message: dict[str, Any]) -> None:
        if message.get("type") == "job.status":
            self.state = message["state"]
        elif message.get("type") == "job.metrics":
            for gpu in message["gpus"]:
                self.readings[(gpu["node"], gpu["index"])] = gpu
        else:
            return
        self.draw()

    def draw(self) -> None:
        click.clear()  # in place on a terminal; one table after the other when piped
        click.echo(top_table(self.job, self.state, self.readings) + "\n")
        if self.tables_left is not None:
            self.tables_left -= 1


@click.command(
    help=_(
        "A job's GPUs: utilisation, memory used/total (GiB), temperature (°C) and power (W), "
        "refreshed as the nodes report until the job ends or Ctrl-C. With --count it "
        "stops after that many tables (the first one included)."
    )
    + examples("gpuctl top 42", "gpuctl top 42 --once", "gpuctl top 42 --count 10 > gpus.txt"),
)
@click.argument("job", type=int)
@click.option("--once", is_flag=True, help=_("Print the newest figures once and exit."))
@click.option(
    "--count",
    type=click.IntRange(1),
    help=_("Stop after this many tables, the first included (default: until the job ends)."),
)
def top(job: int, once: bool, count: int | None) -> None:
    api = session()
    # Over HTTP first: a missing job, a foreign one or a bad token get their precise message.
    state = api.get(f"jobs/{job}/")["state"]
    readings = _latest(api.get(f"jobs/{job}/metrics/", hours=HISTORY_HOURS))
    if once:
        click.echo(top_table(job, state, readings))
        return
    watch = Watch(api, job, state, readings, count)
    watch.draw()
    with contextlib.suppress(KeyboardInterrupt):  # how one stops watching a job that runs on
        watch.run()


COMMANDS = (top,)
