"""Write many rows, each with its own values, in one UPDATE statement per chunk.

Django's `bulk_update` builds a CASE WHEN expression per row and field; at the controller's
volume (hundreds of jobs moving per turn) resolving those expressions cost more than the
database did. This sends the values as a table instead and joins on the primary key. On
PostgreSQL each column travels as one array, so the statement stays the same size whatever
the number of rows (a statement with thousands of placeholders costs the client more to bind
than the server to run):

    UPDATE t SET f1 = v.c2, f2 = v.c3
    FROM unnest(%s::bigint[], %s::varchar[], %s::jsonb[]) AS v(c1, c2, c3) WHERE t.id = v.c1

SQLite (3.33 and newer) gets the same join over a VALUES list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

BATCH_ROWS = 500


def update_rows(
    objs: Sequence[Model], fields: Sequence[str], *, where: Mapping[str, Any] | None = None
) -> int:
    """Save `fields` of every object in `objs` (all of one model); returns rows updated."""
    if not objs or not fields:
        return 0
    names = [objs[0]._meta.pk.attname, *(objs[0]._meta.get_field(f).attname for f in fields)]  # type: ignore[union-attr]
    rows = [[getattr(obj, name) for name in names] for obj in objs]
    return update_values(type(objs[0]), fields, rows, where=where)


def update_values(
    model: type[Model],
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    where: Mapping[str, Any] | None = None,
) -> int:
    """Write each row's values (primary key first, then `fields` in order) to the row with that
    key; returns rows updated. `where` ({field: value}) leaves alone rows that no longer match.

    For many rows of which no model instance is at hand: building one per row costs more than
    the write.
    """
    if not rows or not fields:
        return 0
    meta = model._meta
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    columns: list[Field] = [meta.pk, *(meta.get_field(name) for name in fields)]  # type: ignore[list-item]
    names = [f"c{i + 1}" for i in range(len(columns))]
    table = quote(meta.db_table)
    assignments = ", ".join(
        f"{quote(str(column.column))} = v.{name}"
        for column, name in zip(columns[1:], names[1:], strict=True)
    )
    conditions = [f"{table}.{quote(str(columns[0].column))} = v.c1"]
    condition_params = []
    for name, value in (where or {}).items():
        field = meta.get_field(name)
        conditions.append(f"{table}.{quote(str(field.column))} = %s")  # type: ignore[union-attr]
        condition_params.append(field.get_db_prep_save(value, connection))  # type: ignore[union-attr]
    head = f"UPDATE {table} SET {assignments} FROM "
    tail = f" WHERE {' AND '.join(conditions)}"
    updated = 0
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH_ROWS):
            prepared = [
                [
                    column.get_db_prep_save(value, connection)
                    for column, value in zip(columns, row, strict=True)
                ]
                for row in rows[start : start + BATCH_ROWS]
            ]
            source, params = _source(connection, columns, names, prepared)
            cursor.execute(head + source + tail, [*params, *condition_params])
            updated += cursor.rowcount
    return updated


def _source(
    connection: BaseDatabaseWrapper,
    columns: list[Field],
    names: list[str],
    rows: list[list[Any]],
) -> tuple[str, list[Any]]:
    """The rows as a table `v` with columns `names`, and its parameters."""
    if connection.vendor == "postgresql":
        arrays = ", ".join(f"%s::{column.cast_db_type(connection)}[]" for column in columns)
        return f"unnest({arrays}) AS v({', '.join(names)})", [
            list(c) for c in zip(*rows, strict=True)
        ]
    row = f"({', '.join(['%s'] * len(columns))})"
    values = f"(VALUES {', '.join([row] * len(rows))})"
    # SQLite names a VALUES list's columns column1, column2, ...
    renamed = ", ".join(f"column{i + 1} AS {name}" for i, name in enumerate(names))
    return f"(SELECT {renamed} FROM {values}) AS v", [cell for r in rows for cell in r]
