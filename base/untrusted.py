"""Checks on text and structures a client sent, shared by every way in (paths, queries, bodies).

PostgreSQL text cannot hold NUL, UTF-8 cannot encode a lone surrogate, and a structure nested
without bound exhausts a recursive parser's stack: each surfaced as a 500 deep inside a view, or
in the middle of a streamed answer. Refusing them where they enter names the field instead.
"""

from __future__ import annotations

import re

from django.utils.translation import gettext as _

MAX_DEPTH = 32
"""How deeply a body may nest lists and maps: a job spec needs three levels."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored or encoded, if it cannot."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return _("must not contain NUL characters")
    return _("must not contain unpaired surrogates")


def too_deep() -> str:
    return _("is nested deeper than %(depth)d levels") % {"depth": MAX_DEPTH}


def _containers(value: object) -> list[object]:
    """The keys and values directly inside a list or map."""
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    return list(value) if isinstance(value, list) else []


def value_problem(value: object, depth: int = 1) -> str | None:
    """The first problem anywhere inside decoded JSON or YAML, at `depth` levels down already.

    Iterative, and each list or map is looked at once however often YAML aliases repeat it.
    """
    pending, seen = [(value, depth)], set()
    while pending:
        item, level = pending.pop()
        if isinstance(item, str):
            if problem := text_problem(item):
                return problem
        elif isinstance(item, dict | list) and id(item) not in seen:
            if level > MAX_DEPTH:
                return too_deep()
            seen.add(id(item))
            pending.extend((inner, level + 1) for inner in _containers(item))
    return None


def field_problems(data: object, whole: str) -> dict[str, str]:
    """Problems in a decoded body, each under the top-level field it is in (else `whole`)."""
    if not isinstance(data, dict):
        problem = value_problem(data)
        return {whole: problem} if problem else {}
    problems: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(key, str) and (problem := text_problem(key)):
            problems[whole] = problem  # never echo a key that cannot be encoded
        elif problem := (
            text_problem(value) if isinstance(value, str) else value_problem(value, depth=2)
        ):
            problems[str(key)[:64]] = problem
    return problems
