"""Write many rows, each with its own values, in one UPDATE statement per chunk.

The one hand-written write left: Django's `bulk_update` builds a CASE WHEN per row and field,
and resolving those costs the client far more than the database's work. Measured on PostgreSQL
for 500 job rows and ten fields (a controller batch's state changes): `bulk_update` 780-930 ms
of the controller's CPU, one `save(update_fields=...)` per row 220-240 ms, this 6-8 ms. The
values travel as a table joined on the primary key instead:

    UPDATE t SET f1 = v.c2, f2 = v.c3
    FROM jsonb_to_recordset(%s::jsonb) AS v(c1 bigint, c2 varchar, c3 jsonb) WHERE t.id = v.c1

On PostgreSQL the rows go as one JSON document (one parameter, whatever the number of rows);
SQLite (3.33 and newer) gets the same join over a VALUES list. Only public Django API is used
(`Field.cast_db_type`, `get_prep_value`, `get_db_prep_save`, `connection.ops.quote_name`);
tests/base/test_bulk_update.py is the canary that a Django or driver upgrade breaks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

BATCH_ROWS = 500


def update_rows(objs: Sequence[Model], fields: Sequence[str]) -> int:
    """Save `fields` of every object in `objs` (all of one model); returns rows updated."""
    if not objs or not fields:
        return 0
    meta = objs[0]._meta
    names = [meta.pk.attname, *(meta.get_field(f).attname for f in fields)]  # type: ignore[union-attr]
    rows = [[getattr(obj, name) for name in names] for obj in objs]
    return update_values(type(objs[0]), fields, rows)


def update_values(
    model: type[Model],
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    where: Mapping[str, Any] | None = None,
) -> int:
    """Write each row's values (primary key first, then `fields` in order) to the row with that
    key; returns rows updated. `where` ({field: value}) leaves alone rows that no longer match.
    """
    if not rows or not fields:
        return 0
    connection = connections[router.db_for_write(model)]
    updated = 0
    with connection.cursor() as cursor:
        for sql, params in statements(connection, model, fields, rows, where=where):
            cursor.execute(sql, params)
            updated += cursor.rowcount
    return updated


def statements(
    connection: BaseDatabaseWrapper,
    model: type[Model],
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    where: Mapping[str, Any] | None = None,
) -> Iterator[tuple[str, list[Any]]]:
    """The UPDATE statements (with their parameters) that `update_values` sends."""
    meta = model._meta
    quote = connection.ops.quote_name
    columns: list[Field] = [meta.pk, *(meta.get_field(name) for name in fields)]  # type: ignore[list-item]
    names = [f"c{i + 1}" for i in range(len(columns))]
    table = quote(meta.db_table)
    key = f"{table}.{quote(str(columns[0].column))}"
    assignments = ", ".join(
        f"{quote(str(column.column))} = v.{name}"
        for column, name in zip(columns[1:], names[1:], strict=True)
    )
    conditions = [f"{key} = v.c1"]
    condition_params = []
    for name, value in (where or {}).items():
        field = meta.get_field(name)
        conditions.append(f"{table}.{quote(str(field.column))} = %s")  # type: ignore[union-attr]
        condition_params.append(field.get_db_prep_save(value, connection))  # type: ignore[union-attr]
    postgresql = connection.vendor == "postgresql"
    if postgresql:
        # The keys again, as an array: joined only to the function's rows (of which the planner
        # cannot know how many there are), the table would be read whole for every statement.
        conditions.append(f"{key} = ANY(%s)")
    head = f"UPDATE {table} SET {assignments} FROM "
    tail = f" WHERE {' AND '.join(conditions)}"
    source = _json_source if postgresql else _values_source
    for start in range(0, len(rows), BATCH_ROWS):
        chunk = rows[start : start + BATCH_ROWS]
        sql, params = source(connection, columns, names, chunk)
        keys = [[row[0] for row in chunk]] if postgresql else []
        yield head + sql + tail, [*params, *condition_params, *keys]


def _json_source(
    connection: BaseDatabaseWrapper,
    columns: list[Field],
    names: list[str],
    rows: Sequence[Sequence[Any]],
) -> tuple[str, list[Any]]:
    """PostgreSQL: the rows as one JSON document the server reads back as a typed table (one
    parameter, encoded in C: binding a value at a time cost more than the update)."""
    typed = ", ".join(
        f"{n} {c.cast_db_type(connection)}" for n, c in zip(names, columns, strict=True)
    )
    document = [
        {n: c.get_prep_value(v) for n, c, v in zip(names, columns, row, strict=True)}
        for row in rows
    ]
    return f"jsonb_to_recordset(%s::jsonb) AS v({typed})", [
        orjson.dumps(document, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    ]


def _values_source(
    connection: BaseDatabaseWrapper,
    columns: list[Field],
    names: list[str],
    rows: Sequence[Sequence[Any]],
) -> tuple[str, list[Any]]:
    """SQLite: the rows as a VALUES list (whose columns it names column1, column2, ...)."""
    row = f"({', '.join(['%s'] * len(columns))})"
    values = f"(VALUES {', '.join([row] * len(rows))})"
    renamed = ", ".join(f"column{i + 1} AS {name}" for i, name in enumerate(names))
    params = [
        column.get_db_prep_save(value, connection)
        for r in rows
        for column, value in zip(columns, r, strict=True)
    ]
    return f"(SELECT {renamed} FROM {values}) AS v", params
