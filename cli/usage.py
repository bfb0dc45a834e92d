"""`gpuctl usage`: GPU-hours and cost over a month, grouped, from `/api/v1/usage/`."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import click

from cli.api import session
from cli.helptext import examples
from cli.i18n import _
from cli.output import emit, output_option, table

GROUPS = ("team", "user", "gpu_type", "queue", "day")
FIGURES = ("gpu_hours", "cost", "credited_gpu_hours", "credited_cost")


def _figures(row: dict[str, Any]) -> list[str]:
    return [row[name] for name in FIGURES]


def _sum(rows: list[dict[str, Any]]) -> list[Decimal]:
    return [sum((Decimal(row[name]) for row in rows), Decimal(0)) for name in FIGURES]


def _usage_table(usage: dict[str, Any]) -> str:
    groups = usage["group_by"]
    money = usage["currency"]
    headers = [
        *(g.upper().replace("_", " ") for g in groups),
        _("GPU HOURS"),
        _("COST (%(currency)s)") % {"currency": money},
        _("CREDITED GPU HOURS"),
        _("CREDITED (%(currency)s)") % {"currency": money},
    ]
    rows: list[list[Any]] = [[*(r[g] for g in groups), *_figures(r)] for r in usage["rows"]]
    padding = [""] * (len(groups) - 1)
    rows.append([_("TOTAL"), *padding, *_sum(usage["rows"])])
    period = usage["period"]
    text = _("Usage from %(start)s to %(end)s") % {"start": period["from"], "end": period["to"]}
    text += "\n\n" + table(headers, rows)
    if usage["team_totals"]:
        totals = [[t["team"], *_figures(t)] for t in usage["team_totals"]]
        text += "\n\n" + table([_("TEAM TOTAL"), *headers[-4:]], totals)
    return text


@click.command(
    help=_(
        "GPU-hours and their cost in a month, one row per team, user, GPU type, queue or day, "
        "with the total. You see your own jobs, a team lead the whole team, an admin every "
        "team; each of your teams' totals comes last. Credited time (jobs the platform ended: "
        "a lost node, a GPU fault, preemption) is shown apart and not billed."
    )
    + examples(
        "gpuctl usage",
        "gpuctl usage --month 2026-11 --team vision --by user",
        "gpuctl usage --by day -o json | jq '.rows[] | {day, cost}'",
    ),
)
@click.option("--month", metavar="YYYY-MM", help=_("The month (default: this one, UTC)."))
@click.option("--team", help=_("Only this team's usage (its slug)."))
@click.option(
    "--by",
    type=click.Choice(GROUPS),
    default="team",
    show_default=True,
    help=_("One row per this."),
)
@output_option
def usage(month: str | None, team: str | None, by: str, output: str) -> None:
    answer = session().get("usage/", period=month, team=team, group_by=by)
    emit(answer, output, _usage_table)


COMMANDS = (usage,)
