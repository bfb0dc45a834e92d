"""Accumulating upserts: one statement adds batches to their GPU-minutes, one to their jobs'
totals (per thousand rows).

Django's bulk_create(update_conflicts=True) can only overwrite, and a roll-up must add, so these
are written in SQL that SQLite and PostgreSQL share, but for the name of the two-argument max.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection

from monitoring.models import GpuMinute, JobMetrics


def _greatest() -> str:
    return "GREATEST" if connection.vendor == "postgresql" else "MAX"


# Rows per statement: well under PostgreSQL's 65,535 and SQLite's 32,766 parameters.
ROWS_PER_STATEMENT = 1000


def _upsert(table: str, columns: Sequence[str], conflict: str, sets: str, rows: list[Any]) -> None:
    placeholders = "(" + ", ".join(["%s"] * len(columns)) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start : start + ROWS_PER_STATEMENT]
            sql = (
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                + ", ".join([placeholders] * len(chunk))
                + f" ON CONFLICT ({conflict}) DO UPDATE SET {sets}"
            )
            cursor.execute(sql, [value for row in chunk for value in row])


def _max_of(table: str, column: str) -> str:
    # Both sides may be NULL (a GPU without that reading): keep whichever is known.
    old, new = f"{table}.{column}", f"excluded.{column}"
    return f"{column} = {_greatest()}(COALESCE({old}, {new}), COALESCE({new}, {old}))"


MINUTE_COLUMNS = (
    "gpu_id",
    "minute",
    "job_id",
    "samples",
    "util_sum",
    "util_max",
    "fb_used_max",
    "temp_max",
    "power_sum",
)


def add_minutes(rows: list[tuple[Any, ...]]) -> None:
    """Rows in MINUTE_COLUMNS order, at most one per (gpu, minute)."""
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
    _upsert(table, MINUTE_COLUMNS, "gpu_id, minute", sets, rows)


JOB_COLUMNS = (
    "job_id",
    "team_id",
    "samples",
    "util_sum",
    "util_peak",
    "fb_used_peak",
    "energy_joules",
    "gpu_seconds",
    "updated_at",
)


def add_job_totals(rows: list[tuple[Any, ...]]) -> None:
    """Rows in JOB_COLUMNS order, at most one per job."""
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
    _upsert(table, JOB_COLUMNS, "job_id", sets, rows)
