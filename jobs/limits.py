"""What a submission is checked against, read in one statement: the adapter behind
`jobs.actions` for the one read that the ORM makes too dear.

The submitter's membership and cap, the GPU type, the team's quota of it and the team's queues
come back as one row per queue (the rest repeated on each). Read with the ORM, as three queries
(the membership, cap and quota as subqueries of one), the same figures cost the submitting
process 4.1–4.5 ms of CPU per submission against about 0.3 ms for this statement
(`bench/submit_action.py --processes 2 --jobs 500`, PostgreSQL, alternating runs): most of it
compiling the queries, on every submission. The end-to-end replay submits 385 jobs a second on
two cores, where that difference decides whether the submitters keep up.

The statement names its tables and columns through the models' `_meta` (public API), so a
renamed model or field changes it with them (base/rows.py); `tests/jobs/test_limits.py` is its
canary.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from django.db import connection

from base.rows import Columns, column, table
from quotas.models import GpuType, MemberCap, Queue, Quota
from tenants.models import Membership, Team

if TYPE_CHECKING:
    from django.contrib.auth.models import User

GPU_FIELDS = ("id", "name", "gpus_per_node", "node_cpu_millis", "node_memory_bytes")
QUEUE_FIELDS = ("id", "name", "priority", "preemptible", "max_runtime")


@dataclass(frozen=True)
class Limits:
    """What a submission is checked against, as the read found it."""

    member: bool
    cap: int | None
    gpu_type: GpuType | None
    limit: int | None  # the team's quota of that type; None where it has none
    queues: dict[str, Queue]


@cache
def _statement() -> str:
    gpu = ", ".join(column(GpuType, f, "gpu") for f in GPU_FIELDS)
    queue = ", ".join(column(Queue, f, "queue") for f in QUEUE_FIELDS)
    team_id = column(Team, "id", "team")
    return f"""
SELECT {column(Membership, "id", "member")}, {column(MemberCap, "max_gpus", "cap")},
       {column(Quota, "limit", "quota")}, {gpu}, {queue}
FROM {table(Team)} team
LEFT JOIN {table(Membership)} member
       ON {column(Membership, "team", "member")} = {team_id}
      AND {column(Membership, "user", "member")} = %s
LEFT JOIN {table(MemberCap)} cap
       ON {column(MemberCap, "team", "cap")} = {team_id}
      AND {column(MemberCap, "user", "cap")} = %s
LEFT JOIN {table(GpuType)} gpu ON {column(GpuType, "name", "gpu")} = %s
LEFT JOIN {table(Quota)} quota
       ON {column(Quota, "team", "quota")} = {team_id}
      AND {column(Quota, "gpu_type", "quota")} = {column(GpuType, "id", "gpu")}
      AND {column(Quota, "limit", "quota")} > 0
LEFT JOIN {table(Queue)} queue ON {column(Queue, "team", "queue")} = {team_id}
WHERE {team_id} = %s
"""


def read_limits(team: Team, user: User, gpu_type: str) -> Limits | None:
    """The limits of `user` submitting to `team` on `gpu_type`; None if the team is gone."""
    with connection.cursor() as cursor:
        cursor.execute(_statement(), [user.pk, user.pk, gpu_type, team.pk])
        rows = cursor.fetchall()
    if not rows:
        return None
    member, cap, limit = rows[0][:3]
    gpu_values = rows[0][3 : 3 + len(GPU_FIELDS)]
    gpu = None
    if gpu_values[0] is not None:  # an instance with the other fields deferred, as `.only()`
        gpu = GpuType.from_db(connection.alias, GPU_FIELDS, gpu_values)
    queues = {}
    for row in rows:
        values = row[3 + len(GPU_FIELDS) :]
        if values[0] is not None:
            queue = Queue.from_db(connection.alias, QUEUE_FIELDS, values)
            queue.team = team
            queues[queue.name] = queue
    return Limits(member is not None, cap, gpu, limit, queues)


_TEAM = Columns(Team, "team")


@cache
def _teams_of() -> str:
    team_id = column(Team, "pk", _TEAM.alias)
    return f"""
SELECT {_TEAM.select()}
FROM {table(Membership)} member
JOIN {table(Team)} {_TEAM.alias} ON {team_id} = {column(Membership, "team", "member")}
WHERE {column(Membership, "user", "member")} = %s
LIMIT 2
"""


def sole_team(user: User) -> Team | None:
    """The one team `user` belongs to; None if they belong to none or to several. A spec that
    names no team goes to it: read by the same kind of statement as the limits, for the same
    reason."""
    with connection.cursor() as cursor:
        cursor.execute(_teams_of(), [user.pk])
        rows = cursor.fetchall()
    return _TEAM.instance(rows[0]) if len(rows) == 1 else None
