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
renamed model or field changes it with them; `tests/jobs/test_limits.py` is its canary.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from django.db import connection
from django.db.models import Field

from quotas.models import GpuType, MemberCap, Queue, Quota
from tenants.models import Membership, Team

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models import Model

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


def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _column(model: type[Model], name: str, alias: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field) and field.column, f"{model.__name__}.{name} has no column"
    return f"{alias}.{connection.ops.quote_name(field.column)}"


@cache
def _statement() -> str:
    gpu = ", ".join(_column(GpuType, f, "gpu") for f in GPU_FIELDS)
    queue = ", ".join(_column(Queue, f, "queue") for f in QUEUE_FIELDS)
    team_id = _column(Team, "id", "team")
    return f"""
SELECT {_column(Membership, "id", "member")}, {_column(MemberCap, "max_gpus", "cap")},
       {_column(Quota, "limit", "quota")}, {gpu}, {queue}
FROM {_table(Team)} team
LEFT JOIN {_table(Membership)} member
       ON {_column(Membership, "team", "member")} = {team_id}
      AND {_column(Membership, "user", "member")} = %s
LEFT JOIN {_table(MemberCap)} cap
       ON {_column(MemberCap, "team", "cap")} = {team_id}
      AND {_column(MemberCap, "user", "cap")} = %s
LEFT JOIN {_table(GpuType)} gpu ON {_column(GpuType, "name", "gpu")} = %s
LEFT JOIN {_table(Quota)} quota
       ON {_column(Quota, "team", "quota")} = {team_id}
      AND {_column(Quota, "gpu_type", "quota")} = {_column(GpuType, "id", "gpu")}
      AND {_column(Quota, "limit", "quota")} > 0
LEFT JOIN {_table(Queue)} queue ON {_column(Queue, "team", "queue")} = {team_id}
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
