"""`gpuctl submit`, `ls`, `get`, `why`, `cancel` and `clone`."""

from __future__ import annotations

from typing import Any, TextIO

import click
import yaml

from cli.api import session
from cli.errors import INVALID, CliError
from cli.helptext import block, examples
from cli.i18n import _
from cli.output import emit, output_option, pairs, table, when
from cli.sweeps import dry_run_table
from cli.sweeps import submitted as sweep_submitted

MAX_PAGE = 500


def _gpus(job: dict[str, Any]) -> str:
    if job["nodes"] > 1:
        return f"{job['nodes']}×{job['gpus_per_node']} {job['gpu_type']}"
    return f"{job['gpus_per_node']} {job['gpu_type']}"


def _waiting(job: dict[str, Any]) -> str:
    reason = job.get("reason")
    return reason["message"] if reason else job.get("state_reason") or ""


def _jobs_table(jobs: list[dict[str, Any]]) -> str:
    headers = ["ID", "NAME", "TEAM", "OWNER", "STATE", "GPUS", "QUEUE", "SUBMITTED", "REASON"]
    rows = [
        [
            j["id"],
            j["name"],
            j["team"],
            j["owner"],
            j["state"],
            _gpus(j),
            j["queue"],
            when(j["submitted_at"]),
            _waiting(j),
        ]
        for j in jobs
    ]
    return table(headers, rows)


def _job_table(job: dict[str, Any]) -> str:
    estimate = job.get("estimated_start") or {}
    items = [
        (_("id"), job["id"]),
        (_("name"), job["name"]),
        (_("team"), job["team"]),
        (_("owner"), job["owner"]),
        (_("queue"), job["queue"]),
        (_("state"), job["state"]),
        (_("reason"), _waiting(job)),
        (_("estimated start"), when(estimate.get("earliest"))),
        (_("image"), job["image"]),
        (_("command"), " ".join([*job.get("command", []), *job.get("args", [])])),
        (_("gpus"), _gpus(job)),
        (_("cpu / memory"), f"{job['cpu']} / {job['memory']}"),
        (_("max runtime"), f"{job['max_runtime']} s"),
        (_("placement"), ", ".join(f"{n}: {g}" for n, g in (job["placement"] or {}).items())),
        (_("submitted"), when(job["submitted_at"])),
        (_("started"), when(job["started_at"])),
        (_("finished"), when(job["finished_at"])),
        (_("exit code"), job["exit_code"]),
        (_("cloned from"), job["cloned_from"]),
    ]
    text = pairs(items)
    events = job.get("events") or []
    if events:
        rows = [[when(e["at"]), e["from_state"], e["to_state"], e["reason"]] for e in events]
        text += "\n\n" + table([_("AT"), _("FROM"), _("TO"), _("REASON")], rows)
    return text


def _submitted(job: dict[str, Any]) -> str:
    return _("job %(id)s %(name)s submitted: %(state)s") % job


def _read_spec(file: TextIO) -> dict[str, Any]:
    try:
        data = yaml.safe_load(file)
    except yaml.YAMLError as exc:
        message = _("%(file)s: not YAML: %(error)s") % {"file": file.name, "error": exc}
        raise CliError(message, INVALID) from exc
    if not isinstance(data, dict):
        message = _("%(file)s: a job spec is a mapping of fields") % {"file": file.name}
        raise CliError(message, INVALID)
    return data


@click.command(
    help=_(
        "Submit a job spec in YAML (the same fields as the API and the web form); `-` reads "
        "stdin. Each problem is printed as `field: message` (exit code 4).\n\n"
        "A spec with `sweep:` submits a sweep, one job per member, in one request: `array: N` "
        "(members 0..N-1) or `params:` (a grid, one member per combination), and optionally "
        "`max_parallel`. `{index}` and `{<param>}` in command and args take each member's "
        "values (`{{` and `}}` are literal braces); each member also gets SWEEP_INDEX and "
        "SWEEP_PARAMS (JSON) in its environment.\n\n"
        "With --dry-run the portal checks the spec as a submission would (the same messages "
        "and exit code 4) and prints whether it fits the team's quota and your cap now, and "
        "the reason and estimated start it would get. Nothing is submitted."
    )
    + block(
        _("Example job.yaml:"),
        "name: train-resnet",
        "team: vision            # " + _("optional if you are in one team"),
        "queue: normal           # " + _("optional"),
        "image: registry.example/vision/train:1.0",
        "command: [python, train.py]",
        "gpu_type: h100-80g",
        "gpus_per_node: 2",
        "nodes: 1",
    )
    + block(
        _("Example sweep.yaml (4 jobs, at most 2 at once):"),
        "name: lr-search",
        "image: registry.example/vision/train:1.0",
        'command: [python, train.py, "--lr={lr}", "--batch={batch}"]',
        "gpu_type: h100-80g",
        "gpus_per_node: 1",
        "sweep:",
        "  params: {lr: [0.001, 0.0003], batch: [32, 64]}",
        "  max_parallel: 2",
    )
    + examples(
        "gpuctl submit job.yaml",
        "gpuctl submit job.yaml --dry-run",
        "gpuctl submit sweep.yaml",
        "gpuctl submit - -o json < job.yaml | jq .id",
    ),
)
@click.argument("spec", type=click.File("r"))
@click.option(
    "--dry-run",
    is_flag=True,
    help=_("Check the spec and tell whether it fits and when it would start; submit nothing."),
)
@output_option
def submit(spec: TextIO, dry_run: bool, output: str) -> None:
    data = _read_spec(spec)
    api = session()
    if dry_run:
        emit(api.post("jobs/dry-run/", data), output, dry_run_table)
    elif "sweep" in data:
        emit(api.post("sweeps/", data), output, sweep_submitted)
    else:
        emit(api.post("jobs/", data), output, _submitted)


@click.command(
    "ls",
    help=_("List the jobs you can see, newest first.")
    + examples(
        "gpuctl ls", "gpuctl ls --mine --state queued,running", "gpuctl ls --team vision -o json"
    ),
)
@click.option("--state", help=_("Comma-separated states, e.g. queued,running."))
@click.option("--team", help=_("Only this team's jobs (its slug)."))
@click.option("--mine", is_flag=True, help=_("Only my jobs."))
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_PAGE),
    default=50,
    show_default=True,
    help=_("The newest this many."),
)
@output_option
def list_jobs(state: str | None, team: str | None, mine: bool, limit: int, output: str) -> None:
    page = session().get(
        "jobs/", state=state, team=team, mine="1" if mine else None, page_size=limit
    )
    jobs = page["results"]
    emit(jobs, output, _jobs_table)
    if output == "table" and page["count"] > len(jobs):
        click.echo(
            _("(%(shown)s of %(count)s jobs; --limit shows more)")
            % {"shown": len(jobs), "count": page["count"]},
            err=True,
        )


@click.command(
    help=_("Show one job: its spec, state, placement and state changes.")
    + examples("gpuctl get 42", "gpuctl get 42 -o yaml"),
)
@click.argument("job", type=int)
@output_option
def get(job: int, output: str) -> None:
    emit(session().get(f"jobs/{job}/"), output, _job_table)


def explanation(job: dict[str, Any]) -> dict[str, Any]:
    """Why a job waits, where it stands and when it should start, from the job's API answer."""
    reason = job.get("reason") or {}
    estimate = job.get("estimated_start") or {}
    return {
        "job": job["id"],
        "state": job["state"],
        "reason": reason.get("code"),
        "message": reason.get("message") or job.get("state_reason") or None,
        "jobs_ahead": (reason.get("figures") or {}).get("jobs_ahead"),
        "figures": reason.get("figures") or {},
        "estimated_start": estimate.get("earliest"),
        "estimated_start_latest": estimate.get("latest"),
    }


def _why_table(why: dict[str, Any]) -> str:
    if why["reason"] is None:
        return _("job %(job)s is %(state)s: not waiting for anything.") % why
    figures = ", ".join(f"{k}={v}" for k, v in why["figures"].items())
    return pairs(
        [
            (_("job"), why["job"]),
            (_("state"), why["state"]),
            (_("reason"), f"{why['reason']}: {why['message']}"),
            (_("figures"), figures),
            (_("jobs ahead"), why["jobs_ahead"]),
            (_("estimated start"), when(why["estimated_start"])),
            (_("at the latest"), when(why["estimated_start_latest"])),
        ]
    )


@click.command(
    help=_("Why a job is waiting, how many jobs are ahead of it, and when it should start.")
    + examples("gpuctl why 42", "gpuctl why 42 -o json | jq .estimated_start"),
)
@click.argument("job", type=int)
@output_option
def why(job: int, output: str) -> None:
    emit(explanation(session().get(f"jobs/{job}/")), output, _why_table)


@click.command(
    help=_("Cancel one or more jobs. Each is tried; the exit code is the first failure's.")
    + examples("gpuctl cancel 42", "gpuctl cancel 42 43 44"),
)
@click.argument("jobs", type=int, nargs=-1, required=True)
@output_option
def cancel(jobs: tuple[int, ...], output: str) -> None:
    api = session()
    done, failed = [], []
    for number in jobs:
        try:
            done.append(api.post(f"jobs/{number}/cancel/"))
        except CliError as exc:
            click.echo(_("job %(id)s: %(error)s") % {"id": number, "error": exc}, err=True)
            failed.append(exc)
    emit(done, output, lambda rows: "\n".join(_("job %(id)s: %(state)s") % r for r in rows))
    if failed:
        raise CliError(
            _("%(n)s of %(total)s not cancelled.") % {"n": len(failed), "total": len(jobs)},
            failed[0].exit_code,
        )


@click.command(
    help=_("Submit a copy of a job's spec.")
    + examples("gpuctl clone 42", "gpuctl clone 42 --name train-resnet-2"),
)
@click.argument("job", type=int)
@click.option("--name", help=_("A new name for the copy (default: the same)."))
@output_option
def clone(job: int, name: str | None, output: str) -> None:
    body = {"name": name} if name else {}
    emit(session().post(f"jobs/{job}/clone/", body), output, _submitted)


COMMANDS = (submit, list_jobs, get, why, cancel, clone)
