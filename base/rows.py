"""Rows of the hottest reads, read by a statement written once and turned into model instances.

Every API request authenticates its token, and every submission finds its team: through the
ORM each such read compiles its query again, 0.4-0.7 ms of the web process's CPU against about
0.05 ms to run the same statement (docs/performance.md, "Serving"). A `Columns` names a model's
table and columns through `_meta` (public API), so a renamed field changes the statement with
it, and builds instances as the ORM does: each value through the field's own converters (the
backend's, then the field's), then `Model.from_db`. The statements' tests are their canaries:
the instances equal what the ORM reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model
from django.db.models.expressions import Col

M = TypeVar("M", bound=Model)
Converter = Callable[..., Any]


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def column(model: type[Model], name: str, alias: str) -> str:
    """`alias."column"` of the field `name` ("pk" for the primary key)."""
    field = model._meta.pk if name == "pk" else model._meta.get_field(name)
    assert isinstance(field, Field) and field.column, f"{model.__name__}.{name} has no column"
    return f"{alias}.{connection.ops.quote_name(field.column)}"


@dataclass(frozen=True)
class Columns(Generic[M]):
    """Some of a model's columns as a statement selects them under `alias`."""

    model: type[M]
    alias: str
    names: tuple[str, ...] = ()  # none: every concrete field

    @property
    def fields(self) -> list[Field[Any, Any]]:
        # In the model's order, as `Model.from_db` takes them.
        concrete = self.model._meta.concrete_fields
        return [f for f in concrete if not self.names or f.name in self.names]

    def select(self) -> str:
        return ", ".join(column(self.model, field.name, self.alias) for field in self.fields)

    def instance(self, values: Sequence[Any]) -> M:
        """An instance from this selection's values, converted as the ORM converts them (the
        fields not selected are deferred, as with `.only()`)."""
        db = connections[DEFAULT_DB_ALIAS]  # not the proxy, which looks it up at each use
        converted = list(values)
        for index, col, converters in _converters(self, db.vendor):
            for convert in converters:
                converted[index] = convert(converted[index], col, db)
        return self.model.from_db(db.alias, _attnames(self), converted)


# Columns are made once, at import, by the modules whose statements they select.
@cache
def _attnames(columns: Columns[Any]) -> list[str]:
    return [field.attname for field in columns.fields]


@cache
def _converters(columns: Columns[Any], vendor: str) -> list[tuple[int, Col, list[Converter]]]:
    """The columns whose values the ORM converts (the backend's converters, then the field's),
    found once per backend: on PostgreSQL most values arrive as they are kept. The backend's
    converters read only settings, the same for every thread's connection."""
    db = connections[DEFAULT_DB_ALIAS]
    found = []
    for index, field in enumerate(columns.fields):
        col = field.get_col(columns.alias)
        converters = db.ops.get_db_converters(col) + field.get_db_converters(db)
        if converters:
            found.append((index, col, converters))
    return found
