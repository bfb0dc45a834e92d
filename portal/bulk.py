"""Write many rows, each with its own values, in one UPDATE (or INSERT) statement per chunk.

Django's `bulk_update` builds a CASE WHEN expression per row and field; at the controller's
volume (hundreds of jobs moving per turn) resolving those expressions cost more than the
database did. This sends the values as a table instead and joins on the primary key. On
PostgreSQL the rows travel as one JSON document, so the statement and its one parameter cost
the same to bind whatever the number of rows (thousands of placeholders cost the client more
to bind than the server to run):

    UPDATE t SET f1 = v.c2, f2 = v.c3
    FROM jsonb_to_recordset(%s::jsonb) AS v(c1 bigint, c2 varchar, c3 jsonb) WHERE t.id = v.c1

SQLite (3.33 and newer) gets the same join over a VALUES list. New rows go in the same way
(`insert_rows`): INSERT ... SELECT from the same document.

Inside `together()`, inserts and other writes whose results nobody reads are held and sent in
one round trip when the block ends (on PostgreSQL): a submission wrote its job's event, its audit
event and the audit head's hash one round trip each, and each round trip cost the client more
than the server's work.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import orjson
from django.db import connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

BATCH_ROWS = 500
Statement = tuple[str, list[Any]]

_held: ContextVar[dict[str, list[Statement]] | None] = ContextVar("held_writes", default=None)
_at_commit: ContextVar[dict[str, list[Statement]] | None] = ContextVar(
    "writes_at_commit", default=None
)


@contextmanager
def transaction_together(using: str = "default") -> Iterator[None]:
    """`transaction.atomic()`, where the writes `together()` blocks send last go with the COMMIT.

    On PostgreSQL, in the outermost block: a `together()` block that ends inside it leaves its
    writes waiting, and they go before the next statement the transaction runs, or with its
    COMMIT, in one round trip. A submission, and each batch of the controller's, wrote the audit
    chain's head and then committed, one round trip each, with the head locked through both;
    every other writer of the chain waited for them. Elsewhere, and nested, it is
    `transaction.atomic()`.
    """
    connection = connections[using]
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        with transaction.atomic(using=using):
            yield
        return
    waiting: list[Statement] = []

    def after_waiting(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if waiting:
            _send(using, _taken(waiting))
        return execute(sql, params, many, context)

    with transaction.atomic(using=using), connection.execute_wrapper(after_waiting):
        token = _at_commit.set((_at_commit.get() or {}) | {using: waiting})
        try:
            yield
        finally:
            _at_commit.reset(token)
        if waiting and not connection.needs_rollback:
            _send(using, [*_taken(waiting), ("COMMIT", [])])  # the commit that follows is a no-op


def _taken(statements: list[Statement]) -> list[Statement]:
    """The statements, leaving the list empty (so that sending them waits for none)."""
    taken = list(statements)
    statements.clear()
    return taken


@contextmanager
def together() -> Iterator[None]:
    """Hold the writes made inside by `insert_rows`, `write_rows` and `execute_later`, and send
    them when the block ends: on PostgreSQL as one string of statements, in one round trip.

    Open it inside the transaction, around writes nothing in the block reads back (the block
    sees none of them until it ends). After an exception nothing held is sent (the transaction
    rolls back anyway). Elsewhere than PostgreSQL, and inside an outer block, it changes
    nothing.
    """
    if _held.get() is not None:
        yield
        return
    held: dict[str, list[Statement]] = {}
    token = _held.set(held)
    try:
        yield
    finally:
        _held.reset(token)
    for alias, statements in held.items():
        waiting = (_at_commit.get() or {}).get(alias)
        if waiting is not None:  # in a `transaction_together()`: sent with what runs next
            waiting.extend(statements)
        else:
            _send(alias, statements)


def _send(alias: str, statements: list[Statement]) -> None:
    """The statements as one string, in one round trip."""
    sql = "; ".join(statement for statement, _ in statements)
    with _binding_client_side(connections[alias]) as cursor:
        cursor.execute(sql, [param for _, params in statements for param in params])


@contextmanager
def _binding_client_side(connection: BaseDatabaseWrapper) -> Iterator[Any]:
    """A cursor that writes the values into the statements and sends them as one simple
    query, the only way several statements travel together: the connection's own cursors bind
    on the server (see `DATABASES` in the settings), which takes one statement at a time."""
    import psycopg  # PostgreSQL's driver: only PostgreSQL holds writes (see `execute_later`)

    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw: Any = psycopg.ClientCursor(connection.connection)
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    with wrap(raw) as cursor:
        yield cursor


def execute_later(sql: str, params: Sequence[Any], using: str = "default") -> None:
    """Run a statement whose result nobody reads: at once, or held by `together()`."""
    connection = connections[using]
    held = _held.get()
    if held is not None and connection.vendor == "postgresql":
        held.setdefault(using, []).append((sql, list(params)))
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def insert_rows(objs: Sequence[Model]) -> None:
    """INSERT every object in `objs` (all of one model, none saved yet); their primary keys are
    not read back (inside `together()`, the rows go in when the block ends). Objects given
    their primary keys (all of them, or none) go in with those.

    `bulk_create` binds a placeholder per field and row; for the controller's JobEvents, audit
    events and log chunks (thousands a second at full load) building and binding those cost
    more than the inserts did. On PostgreSQL the rows go as one JSON document, as in
    `update_values`; elsewhere this is `bulk_create`.
    """
    if not objs:
        return
    model = type(objs[0])
    connection = connections[router.db_for_write(model)]
    if connection.vendor != "postgresql":
        model._base_manager.bulk_create(objs, batch_size=BATCH_ROWS)
        return
    meta = model._meta
    quote = connection.ops.quote_name
    keyed = objs[0].pk is not None
    columns: list[Field] = [f for f in meta.concrete_fields if keyed or f is not meta.auto_field]
    names = [f"c{i + 1}" for i in range(len(columns))]
    head = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(str(c.column)) for c in columns)})"
        f" SELECT {', '.join(names)} FROM "
    )
    for start in range(0, len(objs), BATCH_ROWS):
        # pre_save: what a save would write (auto_now_add stamps, foreign keys' ids).
        rows = [
            [c.pre_save(obj, True) for c in columns] for obj in objs[start : start + BATCH_ROWS]
        ]
        sql, params = _json_source(connection, columns, names, rows)
        execute_later(head + sql, params, connection.alias)


def update_rows(
    objs: Sequence[Model], fields: Sequence[str], *, where: Mapping[str, Any] | None = None
) -> int:
    """Save `fields` of every object in `objs` (all of one model); returns rows updated."""
    if not objs or not fields:
        return 0
    return update_values(type(objs[0]), fields, _rows_of(objs, fields), where=where)


def write_rows(objs: Sequence[Model], fields: Sequence[str]) -> None:
    """As `update_rows`, where nobody reads how many rows changed (the caller holds them
    locked): held by `together()` with the other writes."""
    if not objs or not fields:
        return
    model = type(objs[0])
    connection = connections[router.db_for_write(model)]
    for sql, params in statements(connection, model, fields, _rows_of(objs, fields)):
        execute_later(sql, params, connection.alias)


def _rows_of(objs: Sequence[Model], fields: Sequence[str]) -> list[list[Any]]:
    """Each object's primary key, then its `fields`, as `update_values` takes them."""
    meta = objs[0]._meta
    names = [meta.pk.attname, *(meta.get_field(f).attname for f in fields)]  # type: ignore[union-attr]
    return [[getattr(obj, name) for name in names] for obj in objs]


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
    postgresql = connection.vendor == "postgresql"
    if postgresql:
        # The keys again, as an array: joined only to the function's rows (of which the planner
        # cannot know how many there are), the table was read whole for every statement, and
        # the job table only grows.
        tail += f" AND {table}.{quote(str(columns[0].column))} = ANY(%s)"
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
    """PostgreSQL: the rows as one JSON document the server reads back as a typed table.

    One parameter, encoded in C, whatever the number of rows and columns: binding a value (or
    an array element) at a time cost the controller more than the server spent on the update.
    """
    typed = _record_type(connection, columns, names)
    document = [
        {n: c.get_prep_value(v) for n, c, v in zip(names, columns, row, strict=True)}
        for row in rows
    ]
    return f"jsonb_to_recordset(%s::jsonb) AS v({typed})", [
        orjson.dumps(document, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    ]


_record_types: dict[tuple[str, tuple[Field, ...], tuple[str, ...]], str] = {}


def _record_type(
    connection: BaseDatabaseWrapper, columns: Sequence[Field], names: Sequence[str]
) -> str:
    """`c1 bigint, c2 varchar(12), ...`: the same few column lists come again and again (a
    submission's job, the controller's state changes), and working out each column's type
    every time was a tenth of a submission's own CPU."""
    key = (connection.vendor, tuple(columns), tuple(names))
    typed = _record_types.get(key)
    if typed is None:
        typed = ", ".join(
            f"{n} {c.cast_db_type(connection)}" for n, c in zip(names, columns, strict=True)
        )
        _record_types[key] = typed
    return typed


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
