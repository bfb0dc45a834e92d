"""Live messages built from jobs: a job's status, a team's GPUs against quota.

The message types, group names and sends are in base/streams.py. A status message carries
codes and figures only, built once for every subscriber; `localised` adds the words a person
reads in the language of whoever receives it (the consumer, as it sends; an API view, as it
answers).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from django.db import transaction

from base.streams import (
    JobStatusMessage,
    JobWaitingMessage,
    TeamUsageMessage,
    UsageRowPayload,
    job_group,
    send_now,
    team_group,
)
from jobs.models import Job, State
from jobs.reasons import reason_label, reason_text
from tenants.models import Team


def _changing_fields(job: Job) -> dict[str, Any]:
    """What a transition changes, read at once (the job may move on in the same transaction)."""
    return {
        "state": job.state,
        "reason": job.state_reason,
        "pending_code": job.pending_code,
        "pending_message": job.pending_message,
        "pending_figures": job.pending_figures or {},
        "estimated_start": job.estimated_start.isoformat() if job.estimated_start else None,
    }


def status_message(job: Job, at: str, changing: dict[str, Any] | None = None) -> JobStatusMessage:
    message: JobStatusMessage = {
        "type": "job.status",
        "job_id": job.pk,
        "name": job.name,
        "owner": job.owner.get_username(),
        "at": at,
        "gpus": job.total_gpus,
        "gpu_type": job.gpu_type.name,
        "queue": job.queue.name,
        "queue_priority": job.queue.priority,
        "submitted_at": job.submitted_at.isoformat(),
        **_changing_fields(job),  # type: ignore[typeddict-item]
    }
    message.update(changing or {})  # type: ignore[typeddict-item]
    return message


def localised(message: Mapping[str, Any]) -> dict[str, Any]:
    """A status (or waiting) message with its words in the active language, the codes kept
    beside them: `state_label` for `state`, `pending_label` and `pending_reason` for
    `pending_code`."""
    code = message["pending_code"]
    reason = reason_text(code, message.get("pending_figures") or {}, message["pending_message"])
    return {
        **message,
        "state_label": str(State(message["state"]).label),
        "pending_label": reason_label(code) if code else "",
        "pending_reason": reason if code else "",
    }


def usage_messages(teams: Sequence[Team]) -> list[TeamUsageMessage]:
    """Each team's GPUs held against quota, from one grouped query for all of them."""
    from jobs.usage import usage_against_quota

    rows: dict[int, list[UsageRowPayload]] = {team.pk: [] for team in teams}
    for r in usage_against_quota(teams):
        rows[r.team.pk].append(
            {"gpu_type": r.gpu_type, "used": r.used, "guaranteed": r.guaranteed, "limit": r.limit}
        )
    return [{"type": "team.usage", "team": team.slug, "rows": rows[team.pk]} for team in teams]


def usage_message(team: Team) -> TeamUsageMessage:
    return usage_messages([team])[0]


_usage_held: ContextVar[dict[int, Team] | None] = ContextVar("usage_held", default=None)


@contextmanager
def holding_usage(into: dict[int, Team]) -> Iterator[None]:
    """Inside, teams whose held GPUs change are added to `into` rather than sent their usage
    figures with each batch; the caller sends them with `publish_usage` when it sees fit. The
    controller, moving hundreds of jobs a second, sends each team's figures about once a second
    instead of once per batch."""
    token = _usage_held.set(into)
    try:
        yield
    finally:
        _usage_held.reset(token)


Explanation = tuple[int, str, str, dict[str, Any], datetime | None, datetime | None]
"""What the controller wrote of a waiting job: (id, code, message, figures, estimated start,
its latest)."""


def publish_waiting(explanations: Sequence[Explanation]) -> None:
    """Tell the jobs' pages and their teams' lists of new reasons, places and estimates, all
    in one hop (called once the controller's writes commit)."""
    if not explanations:
        return
    teams = dict(
        Job.unscoped.filter(pk__in=[row[0] for row in explanations]).values_list("id", "team_id")
    )
    outgoing: list[tuple[str, Any]] = []
    for job_id, code, message, figures, start, latest in explanations:
        if job_id not in teams:
            continue
        waiting: JobWaitingMessage = {
            "type": "job.waiting",
            "job_id": job_id,
            "state": "QUEUED",
            "pending_code": code,
            "pending_message": message,
            "pending_figures": figures,
            "estimated_start": start.isoformat() if start else None,
            "estimated_start_latest": latest.isoformat() if latest else None,
        }
        outgoing.append((job_group(teams[job_id], job_id), waiting))
        outgoing.append((team_group(teams[job_id]), waiting))
    send_now(outgoing)


def publish_usage(teams: Sequence[Team]) -> None:
    """Send these teams their usage figures now, as the database has them."""
    if teams:
        messages = usage_messages(teams)
        send_now([(team_group(t.pk), m) for t, m in zip(teams, messages, strict=True)])


def publish_statuses(changes: Sequence[tuple[Job, str]], usage_teams: Sequence[Team]) -> None:
    """After the transaction commits, tell the jobs' and teams' subscribers, all in one hop.

    `changes`: (job, at) per job that moved, as it stands now. `usage_teams`: teams whose held
    GPUs changed, each sent its usage figures once (or held, see `holding_usage`).
    """
    held = _usage_held.get()
    if held is not None:
        held.update((team.pk, team) for team in usage_teams)
        usage_teams = []
    if not changes and not usage_teams:
        return
    snapshots = [(job, at, _changing_fields(job)) for job, at in changes]

    def send() -> None:
        # Built after the commit: the job's owner, queue and type may need a query, which must
        # not lengthen the transaction; the usage figures then include these changes.
        outgoing: list[tuple[str, Any]] = []
        for job, at, changing in snapshots:
            message = status_message(job, at, changing)
            outgoing.append((job_group(job.team_id, job.pk), message))
            outgoing.append((team_group(job.team_id), message))
        if usage_teams:
            messages = usage_messages(usage_teams)
            outgoing += [(team_group(t.pk), m) for t, m in zip(usage_teams, messages, strict=True)]
        send_now(outgoing)

    transaction.on_commit(send)
