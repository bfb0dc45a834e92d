"""`LockedJobs`: job rows locked for the rest of the transaction, many in one statement.

The controller locks the jobs a batch of watch reports or a scheduling cycle is about, dozens of
times a second. Through the ORM, each batch's query was compiled afresh (a third of the cost of
locking) and each row built its own team, owner, queue and GPU type objects, though most rows
share them. Here the statement is written once per set of fields (`_Statement`), and a batch's
rows share one object per related row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

from jobs.models import Job

RELATED = ("team", "owner", "queue", "gpu_type")
"""What every locked job brings along: its status messages and audit events name them."""
CHUNK = 1000


@dataclass(frozen=True)
class _Part:
    """The columns of one model in the statement's rows, from `start`, as `from_db` takes them."""

    model: type[Model]
    attnames: tuple[str, ...]
    converters: tuple[tuple[Callable[..., Any], ...], ...]
    expressions: tuple[Any, ...]
    start: int

    def build(self, alias: str, row: Sequence[Any], connection: BaseDatabaseWrapper) -> Model:
        values = list(row[self.start : self.start + len(self.attnames)])
        for i, converters in enumerate(self.converters):
            for convert in converters:
                values[i] = convert(values[i], self.expressions[i], connection)
        return self.model.from_db(alias, list(self.attnames), values)


class _Statement:
    """SELECT job columns and its related rows' columns, in id order, locking the job rows.

    FOR NO KEY UPDATE OF the job table only: locking the joined team, queue and user rows too
    would block (and could deadlock with) every submission to those teams, and a plain FOR
    UPDATE would also block (and deadlock with) every insert that refers to a locked job (log
    chunks, roll-ups): a foreign key check takes KEY SHARE.
    """

    def __init__(self, connection: BaseDatabaseWrapper, only: tuple[str, ...]) -> None:
        quote = connection.ops.quote_name
        table = Job._meta.db_table
        own = {name for name in only if "__" not in name}
        wanted: dict[str, set[str]] = {relation: set() for relation in RELATED}
        for name in only:
            if "__" in name:
                relation, _, field_name = name.partition("__")
                wanted[relation].add(field_name)
        columns: list[str] = []
        joins: list[str] = []

        def part(model: type[Model], alias: str, names: set[str] | None) -> _Part:
            fields: list[Field[Any, Any]] = [
                f
                for f in model._meta.concrete_fields
                if names is None or f.primary_key or f.name in names or f.attname in names
            ]
            expressions = tuple(f.get_col(alias) for f in fields)
            converters = tuple(
                tuple(
                    connection.ops.get_db_converters(expression)
                    + expression.get_db_converters(connection)
                )
                for expression in expressions
            )
            assert fields[0].primary_key, f"{model.__name__}: the primary key comes first"
            start = len(columns)
            columns.extend(f"{quote(alias)}.{quote(str(f.column))}" for f in fields)
            return _Part(model, tuple(f.attname for f in fields), converters, expressions, start)

        self.job = part(Job, table, own or None)
        self.related: dict[str, _Part] = {}
        for relation in RELATED:
            field = Job._meta.get_field(relation)
            model = field.related_model
            assert isinstance(model, type) and issubclass(model, Model)
            alias = model._meta.db_table
            self.related[relation] = part(model, alias, wanted[relation] if only else None)
            joins.append(
                f"INNER JOIN {quote(alias)} ON {quote(table)}.{quote(str(field.column))}"  # type: ignore[union-attr]
                f" = {quote(alias)}.{quote(str(model._meta.pk.column))}"
            )
        self.postgresql = connection.vendor == "postgresql"
        key = f"{quote(table)}.{quote(str(Job._meta.pk.column))}"
        self.head = f"SELECT {', '.join(columns)} FROM {quote(table)} {' '.join(joins)} WHERE {key}"
        self.tail = f" ORDER BY {key}" + (
            f" FOR NO KEY UPDATE OF {quote(table)}" if self.postgresql else ""
        )

    def sql(self, job_ids: list[int]) -> tuple[str, list[Any]]:
        if self.postgresql:
            return f"{self.head} = ANY(%s){self.tail}", [job_ids]
        return f"{self.head} IN ({', '.join(['%s'] * len(job_ids))}){self.tail}", job_ids


_statements: dict[tuple[str, tuple[str, ...]], _Statement] = {}


def _statement(connection: BaseDatabaseWrapper, only: tuple[str, ...]) -> _Statement:
    key = (connection.alias, only)
    if key not in _statements:
        _statements[key] = _Statement(connection, only)
    return _statements[key]


class LockedJobs:
    """Job rows locked FOR UPDATE until the transaction ends, one object per job.

    `lock()` takes many rows in one query (in id order, so two lockers never deadlock); `get()`
    fetches one it has not seen. Every change in the transaction goes through the same object,
    which is what lets `jobs.states.batch()` write them together. With `only` (field names,
    `relation__field` for the team, owner, queue and GPU type), just those fields are read; as
    with the ORM's `only()`, anything else is loaded when first read.
    """

    def __init__(self, only: tuple[str, ...] = ()) -> None:
        self._rows: dict[int, Job | None] = {}
        self._only = only

    def lock(self, job_ids: Iterable[int]) -> None:
        wanted = sorted(set(job_ids) - self._rows.keys())
        if not wanted:
            return
        alias = router.db_for_write(Job)
        connection = connections[alias]
        statement = _statement(connection, self._only)
        shared: dict[tuple[str, object], Model] = {}
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            with connection.cursor() as cursor:
                cursor.execute(*statement.sql(chunk))
                rows = cursor.fetchall()
            found: dict[int, Job] = {}
            for row in rows:
                job = statement.job.build(alias, row, connection)
                assert isinstance(job, Job)
                for relation, part in statement.related.items():
                    key = (relation, row[part.start])  # the related row's primary key
                    if key not in shared:
                        shared[key] = part.build(alias, row, connection)
                    Job._meta.get_field(relation).set_cached_value(job, shared[key])  # type: ignore[union-attr]
                found[job.pk] = job
            for job_id in chunk:
                self._rows[job_id] = found.get(job_id)

    def get(self, job_id: int) -> Job | None:
        if job_id not in self._rows:
            self.lock([job_id])
        return self._rows[job_id]
