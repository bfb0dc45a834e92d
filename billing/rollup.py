"""The daily usage roll-up's two statements of our own: adding closed segments' GPU time to it,
and reading it in one snapshot with the open segments.

Why not the ORM: adding is an upsert that *adds* to the row it meets (INSERT ... ON CONFLICT
DO UPDATE SET gpu_microseconds = gpu_microseconds + excluded.gpu_microseconds, one statement
for a whole flush); `bulk_create(update_conflicts=True)` can only overwrite the row. And Django
has no per-transaction isolation level: reading the roll-up and the open segments apart under
READ COMMITTED would miss, or count twice, a segment closed between the two reads, so a report
reads them in one REPEATABLE READ transaction on PostgreSQL (SQLite's transactions are
serializable already). Canary: tests/billing/test_usage_rollup.py compares every report read
this way with the segments summed one by one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta

from django.db import connection, transaction

from billing.models import UsageDay, UsageSegment

MICROSECOND = timedelta(microseconds=1)
DayKey = tuple[date, int, int, int, int, bool]
"""A row of the roll-up: (day, team, user, queue, GPU type, credited)."""
ADD_TO_DAY = """
    INSERT INTO {table} (day, team_id, user_id, queue_id, gpu_type_id, credited, gpu_microseconds)
    VALUES (%s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (day, team_id, user_id, queue_id, gpu_type_id, credited)
    DO UPDATE SET gpu_microseconds = {table}.gpu_microseconds + excluded.gpu_microseconds
"""


def days_between(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    """[start, end) split at each UTC midnight."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    while start < end:
        midnight = datetime.combine(start.date() + timedelta(days=1), time(0), tzinfo=UTC)
        yield start, min(midnight, end)
        start = midnight


def add_to_days(segments: Iterable[UsageSegment]) -> None:
    """Add the GPU time of closed `segments` (each once, as it closes) to the daily roll-up."""
    held: dict[DayKey, int] = defaultdict(int)
    for s in segments:
        if s.ended_at is None:
            continue
        for begin, end in days_between(s.started_at, s.ended_at):
            key = (begin.date(), s.team_id, s.user_id, s.queue_id, s.gpu_type_id, s.credited)
            held[key] += s.gpus * ((end - begin) // MICROSECOND)
    if not held:
        return
    day = connection.ops.adapt_datefield_value
    rows = [(day(key[0]), *key[1:], amount) for key, amount in held.items()]
    with connection.cursor() as cursor:
        cursor.executemany(ADD_TO_DAY.format(table=UsageDay._meta.db_table), rows)


@contextmanager
def one_snapshot() -> Iterator[None]:
    """Reads that see the database at one moment (the roll-up and the open segments). Inside
    a transaction already, the caller's isolation decides."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield
