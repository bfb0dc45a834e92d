"""The dry run: would this spec be accepted, does it fit the team's quota and caps now, and what
reason and estimated start would it get? Nothing is written.

The spec goes through the checks a submission makes (the same 400s), then joins a snapshot of
the cluster as the controller builds it, as probe requests submitted now (negative ids: no job
has one), and the scheduler decides that snapshot. A sweep's members join as probes too, at
most `max_parallel` of them. The policy is the `SCHEDULER_POLICY` setting (the controller's
`--policy`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.urls import path
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from base.auth import signed_in
from cluster.policy import effective
from cluster.snapshot import build_snapshot, past_usage
from jobs.api import team_for_submission
from jobs.reasons import reason_text
from jobs.spec import JobSpec, parse_spec
from jobs.sweeps import Checked, SweepPlan, check_submission, expand, split_sweep
from scheduler import Decisions, JobRequest, Policy, PolicyConfig, Snapshot, schedule

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tenants.models import Team


def policy_config() -> PolicyConfig:
    """The policy the controller runs: the admin's choice, else the `SCHEDULER_POLICY` setting."""
    return effective(PolicyConfig(policy=Policy(settings.SCHEDULER_POLICY)))


def _probes(
    team: Team, user: User, spec: JobSpec, checked: Checked, count: int, now: float
) -> list[JobRequest]:
    return [
        JobRequest(
            id=-(index + 1),
            team=team.slug,
            member=user.get_username(),
            gpu_type=checked.gpu_type.name,
            nodes=spec.nodes,
            gpus_per_node=spec.gpus_per_node,
            submit_time=now,
            runtime_limit_s=float(spec.max_runtime or checked.queue.max_runtime),
            priority=checked.queue.priority,
            preemptible=checked.queue.preemptible,
        )
        for index in range(count)
    ]


def _when(moment: float | None) -> str | None:
    if moment is None or moment in (float("inf"), float("-inf")):
        return None
    return datetime.fromtimestamp(moment, tz=UTC).isoformat()


def _outcome(decisions: Decisions, probe: JobRequest, now: float) -> dict[str, Any]:
    """What the cycle made of one probe: started now (where), or why it waits and until when."""
    placement = next((a.placement for a in decisions.admissions if a.job_id == probe.id), None)
    if placement is not None:
        started = {"earliest": _when(now), "latest": _when(now)}
        return {"starts_now": True, "placement": dict(placement), "reason": None,
                "estimated_start": started}  # fmt: skip
    pending = decisions.pending.get(probe.id)
    reason = estimate = None
    if pending is not None:
        figures = dict(pending.reason.figures)
        code = pending.reason.code
        message = reason_text(code, figures, pending.reason.message)
        reason = {"code": code.value, "message": message, "figures": figures}
        if pending.estimated_start_range is not None:
            earliest, latest = pending.estimated_start_range
            estimate = {"earliest": _when(earliest), "latest": _when(latest)}
    return {"starts_now": False, "placement": None, "reason": reason, "estimated_start": estimate}


def _fits(snapshot: Snapshot, probe: JobRequest, checked: Checked, total: int) -> dict[str, Any]:
    """The team's and the member's GPUs held now against the quota and the cap, with `total`
    GPUs more (the whole sweep, or the one job)."""
    held = [r.job for r in snapshot.running if r.job.team == probe.team]
    used = sum(job.gpus for job in held if job.gpu_type == probe.gpu_type)
    guaranteed = next(
        (
            q.guaranteed
            for q in snapshot.quotas
            if (q.team, q.gpu_type) == (probe.team, probe.gpu_type)
        ),
        0,
    )
    quota = {
        "gpu_type": probe.gpu_type,
        "used": used,
        "requested": total,
        "guaranteed": guaranteed,
        "limit": checked.limit,
        "fits": used + total <= checked.limit,
        "within_guarantee": used + total <= guaranteed,
    }
    cap = None
    if checked.cap is not None:
        mine = sum(job.gpus for job in held if job.member == probe.member)
        cap = {
            "used": mine,
            "requested": total,
            "cap": checked.cap,
            "fits": mine + total <= checked.cap,
        }
    return {"quota": quota, "cap": cap}


def dry_run(
    team: Team,
    spec: JobSpec,
    plan: SweepPlan | None,
    *,
    acting_user: User,
    now: datetime | None = None,
    config: PolicyConfig | None = None,
) -> dict[str, Any]:
    """Check `spec` as a submission would (raising the same SpecError) and tell what the
    scheduler would make of it now; writes nothing."""
    checked = check_submission(team, spec, acting_user)
    size = len(expand(spec, plan)) if plan is not None else 1
    config = config or policy_config()
    moment = now or timezone.now()
    snapshot = build_snapshot(moment, past_usage(config, moment))
    probes = _probes(team, acting_user, spec, checked, size, moment.timestamp())
    visible = probes[: plan.max_parallel] if plan and plan.max_parallel else probes
    decisions = schedule(replace(snapshot, queued=(*snapshot.queued, *visible)), config)
    first = _outcome(decisions, probes[0], snapshot.now)
    answer: dict[str, Any] = {
        "valid": True,
        "team": team.slug,
        "queue": checked.queue.name,
        "fits": _fits(snapshot, probes[0], checked, size * probes[0].gpus),
        "policy": config.policy.value,
        **first,
    }
    if plan is not None:
        admitted = {admission.job_id for admission in decisions.admissions}
        started = sum(1 for probe in visible if probe.id in admitted)
        last = _outcome(decisions, visible[-1], snapshot.now) if len(visible) > 1 else first
        answer["sweep"] = {"members": size, "starting_now": started, "last_visible": last}
    return answer


class DryRunView(APIView):
    @extend_schema(request=OpenApiTypes.OBJECT, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        """Validate a job spec (with or without `sweep:`) exactly as a submission would and
        answer whether it fits the team's quota and caps now, and the reason and estimated
        start it would get. Nothing is written."""
        rest, plan = split_sweep(request.data)
        spec = parse_spec(rest)
        team = team_for_submission(request.user, spec.team)
        return Response(dry_run(team, spec, plan, acting_user=signed_in(request)))


urls = [path("jobs/dry-run/", DryRunView.as_view(), name="job-dry-run")]
