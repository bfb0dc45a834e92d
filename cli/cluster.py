"""`gpuctl quota` (a team's GPUs against its quota), `nodes`, `cordon` and `uncordon` (admins)."""

from __future__ import annotations

from typing import Any

import click

from cli.api import session
from cli.errors import USAGE, CliError
from cli.helptext import examples
from cli.i18n import _
from cli.output import emit, output_option, table, when

PAGE = 500


def _quota_table(teams: list[dict[str, Any]]) -> str:
    rows = [
        [team["team"], row["gpu_type"], row["used"], row["guaranteed"], row["limit"]]
        for team in teams
        for row in team["usage"]
    ]
    return table(["TEAM", "GPU TYPE", "USED", "GUARANTEED", "LIMIT"], rows)


@click.command(
    help=_(
        "GPUs a team holds now against its guaranteed quota and limit, per GPU type. Without "
        "TEAM, each of your teams."
    )
    + examples("gpuctl quota", "gpuctl quota vision -o json"),
)
@click.argument("team", required=False)
@output_option
def quota(team: str | None, output: str) -> None:
    api = session()
    slugs = [team] if team else [t["slug"] for t in api.get("me/")["teams"]]
    if not slugs:
        raise CliError(_("You are in no team: name one, e.g. gpuctl quota vision"), USAGE)
    teams = []
    for slug in slugs:
        live = api.get(f"teams/{slug}/live/")
        teams.append({"team": live["team"], "usage": live["usage"]})
    emit(teams, output, _quota_table)


def _nodes_table(nodes: list[dict[str, Any]]) -> str:
    def state(node: dict[str, Any]) -> str:
        if node["cordoned"]:
            return _("cordoned: %(reason)s") % {"reason": node["cordon_reason"] or "-"}
        return _("ready") if node["ready"] else _("not ready")

    rows = [
        [
            n["name"],
            n["gpu_type"],
            f"{n['gpu_allocatable']}/{n['gpu_capacity']}",
            sum(1 for g in n["gpus"] if not g["healthy"]),
            n["rack"],
            when(n["last_heartbeat"]),
            state(n),
        ]
        for n in nodes
    ]
    return table(["NAME", "GPU TYPE", "GPUS", "UNHEALTHY", "RACK", "HEARTBEAT", "STATE"], rows)


@click.command(
    help=_("The cluster's nodes and their GPUs (platform admins).")
    + examples("gpuctl nodes", "gpuctl nodes -o json | jq '.[] | select(.cordoned)'"),
)
@output_option
def nodes(output: str) -> None:
    api = session()
    found: list[dict[str, Any]] = []
    number = 1
    while True:
        page = api.get("nodes/", page=number, page_size=PAGE)
        found += page["results"]
        if not page["next"]:
            break
        number += 1
    emit(found, output, _nodes_table)


def _set_cordon(node: str, action: str, reason: str, output: str) -> None:
    answer = session().post(f"nodes/{node}/{action}/", {"reason": reason})
    emit(answer, output, _nodes_table_one)


def _nodes_table_one(node: dict[str, Any]) -> str:
    return _nodes_table([node])


@click.command(
    help=_("Stop scheduling onto a node (platform admins). Running jobs keep running.")
    + examples('gpuctl cordon h100-a-1 --reason "Xid 79: GPU fell off the bus"'),
)
@click.argument("node")
@click.option("--reason", required=True, help=_("Why, for the audit trail and the nodes page."))
@output_option
def cordon(node: str, reason: str, output: str) -> None:
    _set_cordon(node, "cordon", reason, output)


@click.command(
    help=_("Let the scheduler use a node again (platform admins).")
    + examples('gpuctl uncordon h100-a-1 --reason "GPU replaced"'),
)
@click.argument("node")
@click.option("--reason", default="", help=_("Why, for the audit trail."))
@output_option
def uncordon(node: str, reason: str, output: str) -> None:
    _set_cordon(node, "uncordon", reason, output)


COMMANDS = (quota, nodes, cordon, uncordon)
