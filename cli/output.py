"""Output: a table for people (the default), JSON or YAML for scripts (`-o json|yaml`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
import yaml

from cli.i18n import _

FORMATS = ("table", "json", "yaml")
F = TypeVar("F", bound=Callable[..., Any])


def output_option(command: F) -> F:
    return click.option(
        "-o",
        "--output",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help=_("Output format; json and yaml print what the API answered, for scripts."),
    )(command)


def emit(data: Any, output: str, as_table: Callable[[Any], str]) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    elif output == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), nl=False)
    else:
        click.echo(as_table(data))


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; the last one is left ragged."""
    cells = [[str(h) for h in headers], *([cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def pairs(items: Sequence[tuple[str, Any]]) -> str:
    """`key: value` lines, the keys aligned."""
    width = max((len(key) for key, _value in items), default=0)
    return "\n".join(f"{key + ':':<{width + 1}} {cell(value)}" for key, value in items)


def when(value: str | None) -> str:
    """An API timestamp, shorter: `2025-01-02 03:04:05` (UTC)."""
    if not value:
        return "-"
    return value.replace("T", " ")[:19]
