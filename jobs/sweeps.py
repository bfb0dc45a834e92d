"""Sweeps (array jobs): a spec with `sweep:` becomes one Sweep and its member jobs.

    sweep:
      array: 8                                  # members 0..7, or a grid:
      params: {lr: [0.001, 0.0003], batch: [32, 64]}
      max_parallel: 2                           # optional: members holding GPUs at once

A grid's members are its combinations, the last parameter varying fastest; member i gets
`SWEEP_INDEX=i` and `SWEEP_PARAMS` (its parameters as a JSON object) in its environment, the
name `<name>-<i>`, and its `command` and `args` with placeholders filled: `{index}` and
`{<param>}`, with an optional format spec (`{index:03d}`, `{lr:.0e}`); `{{` and `}}` are
literal braces. An unknown placeholder is refused, naming the field.

The sweep is validated once against the team's quota and caps (its members' shape is the same),
written in one transaction (the jobs and their events in bulk) and audited once with its size.
The controller admits at most `max_parallel` members of a sweep at once: `within_max_parallel`
hides the rest of them from a cycle (`over_parallel` is the pure rule).
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count
from django.http import Http404
from django.utils.translation import gettext as _

from audit.record import BATCH_EVENTS, audit_event, record
from jobs.actions import team_problems
from jobs.models import ACTIVE_STATES, HOLDING_STATES, Job, JobEvent, State, Sweep
from jobs.spec import (
    ENV_NAME,
    MAX_ARG_CHARS,
    MAX_ENV,
    MAX_ENV_VALUE,
    MAX_NAME,
    MAX_SPEC_BYTES,
    JobSpec,
    SpecError,
    masked_env,
    parse_spec,
)
from jobs.states import Moves, transition
from quotas.models import GpuType, Queue
from scheduler.model import JobId, JobRequest
from scheduler.queue import order_key
from tenants.access import can_manage_team

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tenants.models import Team
    from tenants.scoping import AnyUser

MAX_PARAMS = 20
INDEX = "index"
PLAN_FIELDS = ("array", "params", "max_parallel")
RESERVED_ENV = ("SWEEP_INDEX", "SWEEP_PARAMS")
TEMPLATED = ("command", "args")
Scalar = str | int | float | bool


def max_members() -> int:
    """The most members one sweep may have (setting SWEEP_MAX_MEMBERS)."""
    return int(settings.SWEEP_MAX_MEMBERS)


@dataclass(frozen=True)
class SweepPlan:
    """What `sweep:` asks for: an array of `array` members, or the grid of `params`."""

    array: int | None = None
    params: dict[str, list[Scalar]] = field(default_factory=dict)
    max_parallel: int | None = None

    @property
    def size(self) -> int:
        return self.array if self.array is not None else math.prod(map(len, self.params.values()))

    def members(self) -> Iterator[dict[str, Scalar]]:
        """Each member's parameters, in index order."""
        if self.array is not None:
            yield from ({} for _ in range(self.array))
            return
        names = list(self.params)
        for values in product(*self.params.values()):
            yield dict(zip(names, values, strict=True))

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"array": self.array} if self.array is not None else {}
        if self.params:
            found["params"] = self.params
        if self.max_parallel is not None:
            found["max_parallel"] = self.max_parallel
        return found


# -- parsing ------------------------------------------------------------------------------------


def split_sweep(data: object) -> tuple[object, SweepPlan | None]:
    """The spec without its `sweep:` (for `parse_spec`), and the plan it names, if any."""
    if not isinstance(data, dict) or "sweep" not in data:
        return data, None
    rest = {key: value for key, value in data.items() if key != "sweep"}
    return rest, parse_plan(data["sweep"])


def _count(errors: dict[str, str], key: str, value: object, most: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        errors[key] = _("must be an integer")
        return None
    if not 1 <= value <= most:
        message = _("must be between %(low)d and %(high)d, got %(value)d")
        errors[key] = message % {"low": 1, "high": most, "value": value}
        return None
    return value


def _params(errors: dict[str, str], raw: object, most: int) -> dict[str, list[Scalar]]:
    if not isinstance(raw, dict) or not raw:
        errors["sweep.params"] = _("must be a map of name: [values], e.g. {lr: [0.001, 0.01]}")
        return {}
    if len(raw) > MAX_PARAMS:
        message = _("at most %(most)d parameters, got %(count)d")
        errors["sweep.params"] = message % {"most": MAX_PARAMS, "count": len(raw)}
        return {}
    params: dict[str, list[Scalar]] = {}
    for name, values in raw.items():
        key = f"sweep.params.{str(name)[:64]}"
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name) or name == INDEX:
            errors[key] = _("is not a valid parameter name (letters, digits, _; not 'index')")
        elif not isinstance(values, list) or not values:
            errors[key] = _("must be a non-empty list of values")
        elif not all(isinstance(v, str | int | float) for v in values):
            errors[key] = _("values must be strings, numbers or booleans")
        else:
            params[name] = values
    combinations = math.prod(len(v) for v in raw.values() if isinstance(v, list))
    if not errors and combinations > most:
        message = _("%(count)d combinations, at most %(most)d members in a sweep")
        errors["sweep.params"] = message % {"count": combinations, "most": most}
    return params


def parse_plan(raw: object) -> SweepPlan:
    """Check `sweep:`; raise SpecError naming each field at fault."""
    if not isinstance(raw, dict):
        raise SpecError({"sweep": _("must be a mapping with array or params")})
    errors: dict[str, str] = {}
    known = {"fields": ", ".join(PLAN_FIELDS)}
    for unknown in sorted(set(raw) - set(PLAN_FIELDS), key=str):
        errors[f"sweep.{str(unknown)[:64]}"] = _("unknown field (known: %(fields)s)") % known
    if ("array" in raw) == ("params" in raw):
        errors["sweep"] = _("needs either array (a count) or params (a grid), not both")
    most = max_members()
    array = _count(errors, "sweep.array", raw["array"], most) if "array" in raw else None
    params = _params(errors, raw["params"], most) if "params" in raw else {}
    max_parallel = None
    if raw.get("max_parallel") is not None:
        max_parallel = _count(errors, "sweep.max_parallel", raw["max_parallel"], most)
    if errors:
        raise SpecError(errors)
    return SweepPlan(array=array, params=params, max_parallel=max_parallel)


# -- expansion ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """One member job's part of the spec: what differs between members."""

    index: int
    name: str
    command: list[str]
    args: list[str]
    env: dict[str, str]


_FORMATTER = string.Formatter()


def _text(value: Scalar) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _pieces(field_name: str, text: str) -> list[tuple[str, str | None, str]]:
    """(literal, placeholder name or None, format spec) of one string."""
    try:
        parsed = list(_FORMATTER.parse(text))
    except ValueError:
        message = _("unbalanced braces (write {{ and }} for literal ones)")
        raise SpecError({field_name: message}) from None
    pieces = []
    for literal, name, spec, conversion in parsed:
        if conversion is not None:
            raise SpecError({field_name: _("placeholders take no conversion such as !r")})
        if name is not None and "{" in (spec or ""):
            raise SpecError({field_name: _("placeholders may not nest")})
        pieces.append((literal, name, spec or ""))
    return pieces


def _templates(
    spec: JobSpec, plan: SweepPlan
) -> dict[str, list[list[tuple[str, str | None, str]]]]:
    """Each templated field's strings parsed once; unknown placeholders refused."""
    known = [INDEX, *plan.params]
    templates = {}
    for field_name in TEMPLATED:
        parsed = [_pieces(field_name, text) for text in getattr(spec, field_name)]
        for pieces in parsed:
            for _literal, name, _spec in pieces:
                if name is not None and name not in known:
                    message = _("unknown placeholder {%(name)s} (known: %(known)s)")
                    names = ", ".join(f"{{{k}}}" for k in known)
                    raise SpecError({field_name: message % {"name": name[:64], "known": names}})
        templates[field_name] = parsed
    return templates


def _fill(
    field_name: str, pieces: list[tuple[str, str | None, str]], values: dict[str, Any]
) -> str:
    out = []
    for literal, name, spec in pieces:
        out.append(literal)
        if name is None:
            continue
        value = values[name]
        try:
            out.append(format(value, spec) if spec else _text(value))
        except (ValueError, TypeError) as exc:
            message = _("{%(name)s:%(spec)s} cannot format %(value)s: %(error)s")
            figures = {"name": name, "spec": spec, "value": _text(value)[:64], "error": exc}
            raise SpecError({field_name: message % figures}) from None
    return "".join(out)


def _check_shape(spec: JobSpec, plan: SweepPlan) -> None:
    """What the members add to the spec: their names' suffix and two variables."""
    if taken := sorted(set(RESERVED_ENV) & set(spec.env)):
        raise SpecError({"env": _("%(names)s is set by the sweep") % {"names": ", ".join(taken)}})
    if len(spec.env) + len(RESERVED_ENV) > MAX_ENV:
        message = _("at most %(most)d variables in a sweep's member (2 are the sweep's)")
        raise SpecError({"env": message % {"most": MAX_ENV - len(RESERVED_ENV)}})
    longest = MAX_NAME - len(f"-{plan.size - 1}")
    if len(spec.name) > longest:
        message = _("at most %(most)d characters in a sweep of %(size)d (members add -<index>)")
        raise SpecError({"name": message % {"most": longest, "size": plan.size}})


def expand(spec: JobSpec, plan: SweepPlan) -> list[Member]:
    """The members of `plan` over `spec`; raise SpecError naming the field one would break."""
    _check_shape(spec, plan)
    templates = _templates(spec, plan)
    base = len(json.dumps(spec.as_dict(), default=str, ensure_ascii=False).encode())
    members = []
    for index, params in enumerate(plan.members()):
        values = {INDEX: index, **params}
        filled = {
            name: [_fill(name, pieces, values) for pieces in parsed]
            for name, parsed in templates.items()
        }
        for name, strings in filled.items():
            if sum(map(len, strings)) > MAX_ARG_CHARS:
                message = _("must be at most %(most)d characters in all, member %(index)d has more")
                raise SpecError({name: message % {"most": MAX_ARG_CHARS, "index": index}})
        variables = {RESERVED_ENV[0]: str(index), RESERVED_ENV[1]: json.dumps(params)}
        if len(variables[RESERVED_ENV[1]].encode()) > MAX_ENV_VALUE:
            message = _("SWEEP_PARAMS must be at most %(most)d bytes")
            raise SpecError({"sweep.params": message % {"most": MAX_ENV_VALUE}})
        grown = sum(len(s.encode()) for strings in filled.values() for s in strings) + sum(
            len(v.encode()) + 16 for v in variables.values()
        )
        if base + grown > MAX_SPEC_BYTES:
            message = _("member %(index)d is over %(most)d bytes as JSON")
            raise SpecError({"spec": message % {"index": index, "most": MAX_SPEC_BYTES}})
        name = f"{spec.name}-{index}"
        members.append(
            Member(index, name, filled["command"], filled["args"], {**spec.env, **variables})
        )
    return members


# -- actions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    """What a spec resolved to, having passed a submission's checks."""

    queue: Queue
    gpu_type: GpuType
    limit: int
    cap: int | None


def check_submission(team: Team, spec: JobSpec, acting_user: User) -> Checked:
    """The checks `jobs.actions.submit_job` makes (team, membership, queue, quota, image, caps,
    limits), writing nothing; raise SpecError with every problem, as a submission would."""
    resolved, problems = team_problems(team, spec, acting_user)
    if resolved is None:
        raise SpecError(problems)
    return Checked(*resolved)


def parse_sweep(data: object) -> tuple[JobSpec, SweepPlan]:
    """A sweep's spec and plan, checked for shape (no database)."""
    rest, plan = split_sweep(data)
    if plan is None:
        raise SpecError({"sweep": _("is required: array or params")})
    return parse_spec(rest), plan


def submit_sweep(
    team: Team,
    spec: JobSpec,
    plan: SweepPlan,
    *,
    acting_user: User,
    action: str = "sweep.submit",
    cloned_from: Sweep | None = None,
) -> Sweep:
    """Validate a sweep once against the team's queues, quota and caps, and queue all its
    members in one transaction, audited once with the count."""
    checked = check_submission(team, spec, acting_user)
    members = expand(spec, plan)
    given = {key: value for key, value in spec.as_dict().items() if value is not None}
    stored = {**given, "team": team.slug, "sweep": plan.as_dict()}
    with transaction.atomic():
        sweep = Sweep.objects.create(
            team=team,
            owner=acting_user,
            name=spec.name,
            spec=stored,
            param_names=list(plan.params),
            size=len(members),
            max_parallel=plan.max_parallel,
            cloned_from=cloned_from,
        )
        jobs = [_member_job(team, spec, checked, sweep, m, acting_user) for m in members]
        Job.unscoped.bulk_create(jobs, batch_size=BATCH_EVENTS)
        events = [
            JobEvent(team=team, job=job, to_state=State.QUEUED, reason=action, actor=acting_user)
            for job in jobs
        ]
        JobEvent.unscoped.bulk_create(events, batch_size=BATCH_EVENTS)
        record(action, actor=acting_user, team=team, target=sweep, after=_audit_view(sweep, jobs))
    return sweep


def _member_job(
    team: Team, spec: JobSpec, checked: Checked, sweep: Sweep, member: Member, owner: User
) -> Job:
    return Job(
        team=team,
        owner=owner,
        queue=checked.queue,
        gpu_type=checked.gpu_type,
        name=member.name,
        image=spec.image,
        command=member.command,
        args=member.args,
        env=member.env,
        gpus_per_node=spec.gpus_per_node,
        nodes=spec.nodes,
        cpu=spec.cpu,
        memory=spec.memory,
        max_runtime=spec.max_runtime or checked.queue.max_runtime,
        sweep=sweep,
        sweep_index=member.index,
    )


def _audit_view(sweep: Sweep, jobs: Sequence[Job]) -> dict[str, object]:
    spec = dict(sweep.spec)
    spec["env"] = masked_env(spec.get("env") or {})
    return {
        "count": len(jobs),
        "first_job": jobs[0].pk if jobs else None,
        "last_job": jobs[-1].pk if jobs else None,
        "spec": spec,
    }


def cancel_sweep(
    sweep: Sweep, *, acting_user: User, reason: str = "sweep cancelled by user"
) -> int:
    """Cancel every member that has not ended, in one transaction with one audit event; the
    controller stops what runs in the cluster. Returns how many were cancelled."""
    with transaction.atomic():
        jobs = list(
            Job.objects.for_team(sweep.team)
            .select_for_update(no_key=True)
            .filter(sweep=sweep, state__in=ACTIVE_STATES)
            .order_by("id")
        )
        moves = Moves()
        for job in jobs:
            job.team = sweep.team
            transition(job, State.CANCELLED, reason, actor=acting_user, moves=moves)
        after = {"cancelled": len(jobs), "reason": reason}
        moves.audit(
            audit_event(
                "sweep.cancel", actor=acting_user, team=sweep.team, target=sweep, after=after
            )
        )
        moves.flush()
    return len(jobs)


def clone_sweep(sweep: Sweep, *, acting_user: User, name: str | None = None) -> Sweep:
    """Submit a sweep's spec again (optionally under a new name)."""
    data = {**sweep.spec, "name": name or sweep.name, "sweep": stored_plan(sweep).as_dict()}
    spec, plan = parse_sweep(data)
    return submit_sweep(
        sweep.team, spec, plan, acting_user=acting_user, action="sweep.clone", cloned_from=sweep
    )


def can_change_sweep(user: AnyUser, sweep: Sweep) -> bool:
    return user.is_authenticated and (
        sweep.owner_id == user.pk or can_manage_team(user, sweep.team)
    )


def access_sweep(user: AnyUser, sweep_id: int | str, *, write: bool = False) -> Sweep:
    """Teammates may read a sweep; its owner, the team's leads and admins may change it. The
    same 404 whether it is missing or another team's."""
    try:
        pk = int(sweep_id)
    except (TypeError, ValueError):
        raise Http404(_("No such sweep.")) from None
    sweep = Sweep.objects.for_user(user).select_related("team", "owner").filter(pk=pk).first()
    if sweep is None:
        raise Http404(_("No such sweep."))
    if write and not can_change_sweep(user, sweep):
        raise PermissionDenied(_("Only the sweep's owner and the team's leads can change it."))
    return sweep


def stored_plan(sweep: Sweep) -> SweepPlan:
    """The plan a sweep was submitted with, as stored (not checked again: limits may change),
    its grid in the order given (a JSON column may keep a map's keys in an order of its own)."""
    raw = sweep.spec.get("sweep") or {}
    grid = raw.get("params") or {}
    params = {name: grid[name] for name in sweep.param_names if name in grid}
    return SweepPlan(raw.get("array"), params, raw.get("max_parallel"))


def member_states(sweep: Sweep) -> dict[str, int]:
    """How many members are in each state (states with none left out)."""
    rows = (
        Job.objects.for_team(sweep.team).filter(sweep=sweep).values("state").annotate(n=Count("id"))
    )
    counts = {row["state"]: row["n"] for row in rows.order_by()}
    return {state: counts[state] for state in State.values if state in counts}


# -- max_parallel in the controller -------------------------------------------------------------


def over_parallel(
    queued: Iterable[JobRequest],
    member_of: Mapping[JobId, int],
    max_parallel: Mapping[int, int],
    held: Mapping[int, int],
) -> list[JobRequest]:
    """The queued requests to hide from this cycle: of each sweep with a `max_parallel`, all its
    queued members but the first `max_parallel - held` in team order.

    `member_of`: queued job id -> its sweep; `max_parallel`: sweep -> its limit (sweeps without
    one absent); `held`: sweep -> members holding GPUs (admitted or running).
    """
    by_sweep: dict[int, list[JobRequest]] = {}
    for request in queued:
        sweep = member_of.get(request.id)
        if sweep is not None and sweep in max_parallel:
            by_sweep.setdefault(sweep, []).append(request)
    hidden: list[JobRequest] = []
    for sweep, members in by_sweep.items():
        room = max(0, max_parallel[sweep] - held.get(sweep, 0))
        if len(members) > room:
            members.sort(key=order_key)
            hidden += members[room:]
    return hidden


class QueueSource(Protocol):
    """What `cluster.snapshot.QueuedRequests` offers (jobs may not import cluster)."""

    def current(self) -> list[JobRequest]: ...

    def left(self, job_ids: Iterable[int]) -> None: ...

    def returned(self, job_ids: Iterable[int]) -> None: ...


def limited_sweeps() -> tuple[dict[JobId, int], dict[int, int], dict[int, int]]:
    """(queued member -> sweep, sweep -> max_parallel, sweep -> held) of the sweeps with a
    `max_parallel`, from their active members only (an index of its own, by state)."""
    rows = (
        Job.unscoped.filter(
            sweep__isnull=False,
            state__in=[State.QUEUED, *HOLDING_STATES],
            sweep__max_parallel__isnull=False,
        )
        .order_by()
        .values_list("id", "state", "sweep_id", "sweep__max_parallel")
    )
    member_of: dict[JobId, int] = {}
    limits: dict[int, int] = {}
    held: dict[int, int] = {}
    for job_id, state, sweep_id, limit in rows:
        assert limit is not None  # filtered above
        limits[sweep_id] = limit
        if state == State.QUEUED:
            member_of[job_id] = sweep_id
        else:
            held[sweep_id] = held.get(sweep_id, 0) + 1
    return member_of, limits, held


def within_max_parallel(queued: QueueSource) -> list[JobRequest]:
    """The queued requests of `queued.current()` less the sweep members over their sweep's
    `max_parallel`, which also leave `queued`'s index for this cycle (the controller decides
    on the index) and are read back at its next `current()`."""
    requests = queued.current()
    hidden = {request.id for request in over_parallel(requests, *limited_sweeps())}
    if not hidden:
        return requests
    queued.left(hidden)
    queued.returned(hidden)
    return [request for request in requests if request.id not in hidden]
