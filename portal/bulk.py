"""Write many rows, each with its own values, in one UPDATE statement per chunk.

Django's `bulk_update` builds a CASE WHEN expression per row and field; at the controller's
volume (hundreds of jobs moving per turn) resolving those expressions cost more than the
database did. This sends the values as a table instead and joins on the primary key:

    UPDATE t SET f1 = v.column2, f2 = v.column3
    FROM (VALUES (%s, %s, %s), ...) AS v WHERE t.id = v.column1

PostgreSQL and SQLite (3.33 and newer) both take this form; on PostgreSQL each value is cast to
its column's type, as VALUES alone would leave untyped parameters as text.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections, router
from django.db.models import Field, Model

BATCH_ROWS = 500


def update_rows(objs: Sequence[Model], fields: Sequence[str]) -> int:
    """Save `fields` of every object in `objs` (all of one model); returns rows updated."""
    if not objs or not fields:
        return 0
    model = type(objs[0])
    meta = model._meta
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    columns: list[Field] = [meta.pk, *(meta.get_field(name) for name in fields)]  # type: ignore[list-item]
    if connection.vendor == "postgresql":
        cells = [f"CAST(%s AS {column.db_type(connection)})" for column in columns]
    else:
        cells = ["%s"] * len(columns)
    row = f"({', '.join(cells)})"
    names = [f"column{i + 1}" for i in range(len(columns))]  # what both name VALUES columns
    table = quote(meta.db_table)
    assignments = ", ".join(
        f"{quote(str(column.column))} = v.{name}"
        for column, name in zip(columns[1:], names[1:], strict=True)
    )
    updated = 0
    with connection.cursor() as cursor:
        for start in range(0, len(objs), BATCH_ROWS):
            chunk = objs[start : start + BATCH_ROWS]
            params = [
                column.get_db_prep_save(getattr(obj, column.attname), connection)
                for obj in chunk
                for column in columns
            ]
            cursor.execute(
                f"UPDATE {table} SET {assignments} "
                f"FROM (VALUES {', '.join([row] * len(chunk))}) AS v "
                f"WHERE {table}.{quote(str(columns[0].column))} = v.column1",
                params,
            )
            updated += cursor.rowcount
    return updated
