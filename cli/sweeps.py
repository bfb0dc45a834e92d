"""`gpuctl sweep get|cancel|clone SWEEP`, and what `submit` prints for a sweep or a dry run."""

from __future__ import annotations

from typing import Any

import click

from cli.api import session
from cli.helptext import examples
from cli.i18n import _
from cli.output import emit, output_option, pairs, table, when


def _states(sweep: dict[str, Any]) -> str:
    return ", ".join(f"{state} {count}" for state, count in (sweep.get("states") or {}).items())


def submitted(sweep: dict[str, Any]) -> str:
    return _("sweep %(id)s %(name)s submitted: %(size)s jobs queued") % sweep


def _sweep_table(sweep: dict[str, Any]) -> str:
    items = [
        (_("id"), sweep["id"]),
        (_("name"), sweep["name"]),
        (_("team"), sweep["team"]),
        (_("owner"), sweep["owner"]),
        (_("jobs"), sweep["size"]),
        (_("max parallel"), sweep["max_parallel"]),
        (_("states"), _states(sweep)),
        (_("created"), when(sweep["created_at"])),
        (_("cloned from"), sweep["cloned_from"]),
    ]
    text = pairs(items)
    members = sweep.get("members") or []
    if members:
        rows = [
            [
                m["index"],
                m["id"],
                m["state"],
                " ".join(f"{k}={v}" for k, v in m["params"].items()),
                m["reason"],
            ]
            for m in members
        ]
        headers = [_("INDEX"), _("JOB"), _("STATE"), _("PARAMS"), _("REASON")]
        text += "\n\n" + table(headers, rows)
    return text


def _estimate(outcome: dict[str, Any]) -> str:
    estimate = outcome.get("estimated_start") or {}
    return f"{when(estimate.get('earliest'))} – {when(estimate.get('latest'))}"


def dry_run_table(answer: dict[str, Any]) -> str:
    """Whether the spec fits the quota and caps now, and what the scheduler would do."""
    quota, cap = answer["fits"]["quota"], answer["fits"]["cap"]
    reason = answer.get("reason") or {}
    items = [
        (_("valid"), True),
        (_("team / queue"), f"{answer['team']} / {answer['queue']}"),
        (
            _("quota"),
            _("%(used)s of limit %(limit)s %(gpu_type)s in use, %(requested)s more asked") % quota,
        ),
        (_("fits the quota now"), quota["fits"]),
    ]
    if cap is not None:
        items.append((_("fits your cap now"), cap["fits"]))
    items.append((_("starts now"), answer["starts_now"]))
    if answer["starts_now"]:
        placement = answer["placement"] or {}
        items.append((_("placement"), ", ".join(f"{n}: {g}" for n, g in placement.items())))
    else:
        items.append((_("reason"), f"{reason.get('code')}: {reason.get('message')}"))
        items.append((_("estimated start"), _estimate(answer)))
    sweep = answer.get("sweep")
    if sweep:
        items.append((_("sweep members"), sweep["members"]))
        items.append((_("members starting now"), sweep["starting_now"]))
    return _("Dry run: nothing was submitted.") + "\n" + pairs(items)


@click.group(
    help=_("Sweeps: jobs submitted together from one spec with `sweep:`.")
    + examples("gpuctl submit sweep.yaml", "gpuctl sweep get 7", "gpuctl sweep cancel 7"),
)
def sweep() -> None:
    pass


@sweep.command(
    "get",
    help=_("Show a sweep: its members' states at a glance, then each member.")
    + examples("gpuctl sweep get 7", "gpuctl sweep get 7 -o json | jq .states"),
)
@click.argument("sweep_id", metavar="SWEEP", type=int)
@output_option
def get_sweep(sweep_id: int, output: str) -> None:
    emit(session().get(f"sweeps/{sweep_id}/"), output, _sweep_table)


@sweep.command(
    "cancel",
    help=_("Cancel every member of a sweep that has not ended.")
    + examples("gpuctl sweep cancel 7"),
)
@click.argument("sweep_id", metavar="SWEEP", type=int)
@output_option
def cancel_sweep(sweep_id: int, output: str) -> None:
    answer = session().post(f"sweeps/{sweep_id}/cancel/")
    emit(answer, output, lambda a: _("sweep %(id)s: %(cancelled)s jobs cancelled") % a)


@sweep.command(
    "clone",
    help=_("Submit a sweep's spec again.")
    + examples("gpuctl sweep clone 7", "gpuctl sweep clone 7 --name lr-search-2"),
)
@click.argument("sweep_id", metavar="SWEEP", type=int)
@click.option("--name", help=_("A new name for the copy (default: the same)."))
@output_option
def clone_sweep(sweep_id: int, name: str | None, output: str) -> None:
    body = {"name": name} if name else {}
    emit(session().post(f"sweeps/{sweep_id}/clone/", body), output, submitted)


COMMANDS = (sweep,)
