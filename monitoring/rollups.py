"""Accumulating upserts: batches added to their GPU-minutes and their jobs' totals, and the
claim of a batch's identity (`claim`), which tells a resend from a new batch.

Django's bulk_create(update_conflicts=True) can only overwrite, and a roll-up must add, so these
are written in SQL. On PostgreSQL the rows go as one array literal per column (`unnest`): a
fixed, short statement whatever the row count, bound as nine strings (VALUES rows cost a
placeholder and a bound value each: 4.7 ms of CPU for 144 rows). SQLite takes VALUES, a
thousand rows per statement, and calls the two-argument max MAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from monitoring.models import AgentCursor, GpuMinute, JobMetrics


def _greatest() -> str:
    return "GREATEST" if connection.vendor == "postgresql" else "MAX"


# Rows per statement on SQLite: well under its 32,766 parameters.
ROWS_PER_STATEMENT = 1000

Column = tuple[str, str]  # name, PostgreSQL type
Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class _Upsert:
    table: str
    columns: Sequence[Column]
    conflict: str
    sets: str

    def unnest(self) -> str:
        names = ", ".join(name for name, _ in self.columns)
        arrays = ", ".join(f"%s::{kind}[]" for _, kind in self.columns)
        return (
            f"INSERT INTO {self.table} ({names}) SELECT * FROM unnest({arrays})"
            f" ON CONFLICT ({self.conflict}) DO UPDATE SET {self.sets}"
        )

    def values(self, count: int) -> str:
        names = ", ".join(name for name, _ in self.columns)
        row = "(" + ", ".join(["%s"] * len(self.columns)) + ")"
        return (
            f"INSERT INTO {self.table} ({names}) VALUES {', '.join([row] * count)}"
            f" ON CONFLICT ({self.conflict}) DO UPDATE SET {self.sets}"
        )


def add(minutes: Rows, jobs: Rows) -> None:
    """Add rows (MINUTE_COLUMNS order, at most one per GPU and minute) to their GPU-minutes and
    rows (JOB_COLUMNS order, at most one per job) to their jobs' totals, all or nothing.

    On PostgreSQL that is one statement (the minutes in a WITH): one round trip, atomic by
    itself, so a caller with nothing else to write needs no transaction (two round trips
    more)."""
    parts = [(upsert, rows) for upsert, rows in ((_minutes(), minutes), (_jobs(), jobs)) if rows]
    if parts and connection.vendor == "postgresql":
        _add_as_arrays(parts)
    elif parts:
        with transaction.atomic():
            _add_as_values(parts)


def _add_as_arrays(parts: list[tuple[_Upsert, Rows]]) -> None:
    first, *rest = [upsert.unnest() for upsert, _ in parts]
    statement = f"WITH minutes AS ({first} RETURNING 1) {rest[0]}" if rest else first
    arrays = [_array(column) for _, rows in parts for column in zip(*rows, strict=True)]
    with connection.cursor() as cursor:
        cursor.execute(statement, arrays)


def _add_as_values(parts: list[tuple[_Upsert, Rows]]) -> None:
    with connection.cursor() as cursor:
        for upsert, rows in parts:
            for start in range(0, len(rows), ROWS_PER_STATEMENT):
                chunk = rows[start : start + ROWS_PER_STATEMENT]
                cursor.execute(upsert.values(len(chunk)), [v for row in chunk for v in row])


def _array(column: Sequence[Any]) -> str:
    """A PostgreSQL array literal: binding it costs one string, where a list costs a dump and a
    quoting check per value (a third of a batch's CPU on 400 rows)."""
    return "{" + ",".join(map(_element, column)) + "}"


def _element(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, datetime):
        return f'"{value.isoformat()}"'
    return str(value)  # a number: str() of a float is its shortest exact form


def _max_of(table: str, column: str) -> str:
    # Both sides may be NULL (a GPU without that reading): keep whichever is known.
    old, new = f"{table}.{column}", f"excluded.{column}"
    return f"{column} = {_greatest()}(COALESCE({old}, {new}), COALESCE({new}, {old}))"


MINUTE_COLUMNS = (
    ("gpu_id", "int8"),
    ("minute", "int8"),
    ("job_id", "int8"),
    ("samples", "int8"),
    ("util_sum", "float8"),
    ("util_max", "float8"),
    ("fb_used_max", "float8"),
    ("temp_max", "float8"),
    ("power_sum", "float8"),
)


def _minutes() -> _Upsert:
    table = GpuMinute._meta.db_table
    sets = ", ".join(
        [
            f"samples = {table}.samples + excluded.samples",
            f"util_sum = {table}.util_sum + excluded.util_sum",
            f"power_sum = {table}.power_sum + excluded.power_sum",
            f"job_id = COALESCE(excluded.job_id, {table}.job_id)",
            _max_of(table, "util_max"),
            _max_of(table, "fb_used_max"),
            _max_of(table, "temp_max"),
        ]
    )
    return _Upsert(table, MINUTE_COLUMNS, "gpu_id, minute", sets)


JOB_COLUMNS = (
    ("job_id", "int8"),
    ("team_id", "int8"),
    ("samples", "int8"),
    ("util_sum", "float8"),
    ("util_peak", "float8"),
    ("fb_used_peak", "float8"),
    ("energy_joules", "float8"),
    ("gpu_seconds", "float8"),
    ("updated_at", "timestamptz"),
)


def _jobs() -> _Upsert:
    table = JobMetrics._meta.db_table
    sets = ", ".join(
        [
            f"samples = {table}.samples + excluded.samples",
            f"util_sum = {table}.util_sum + excluded.util_sum",
            f"energy_joules = {table}.energy_joules + excluded.energy_joules",
            f"gpu_seconds = {table}.gpu_seconds + excluded.gpu_seconds",
            f"util_peak = {_greatest()}({table}.util_peak, excluded.util_peak)",
            f"fb_used_peak = {_greatest()}({table}.fb_used_peak, excluded.fb_used_peak)",
            "updated_at = excluded.updated_at",
        ]
    )
    return _Upsert(table, JOB_COLUMNS, "job_id", sets)


AgentStart = tuple[int, str]  # (node id, boot)


def claim(batches: Sequence[tuple[int, str, int]]) -> set[AgentStart]:
    """Record each (node id, boot, seq) as the last batch stored of that agent start, unless
    one numbered as high is stored already; return the starts whose batch is new (to store),
    leaving out those whose batch is a resend. At most one entry per start.

    One upsert whose conditional update returns only the rows it wrote: a resend racing its
    original through another web process waits on the row and finds itself not new."""
    if not batches:
        return set()
    table = AgentCursor._meta.db_table
    rows = ", ".join(["(%s, %s, %s)"] * len(batches))
    statement = (
        f"INSERT INTO {table} (node_id, boot, seq) VALUES {rows}"
        f" ON CONFLICT (node_id, boot) DO UPDATE SET seq = excluded.seq"
        f" WHERE {table}.seq < excluded.seq RETURNING node_id, boot"
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, [value for batch in batches for value in batch])
        return {(node_id, boot) for node_id, boot in cursor.fetchall()}
