"""Library before internals (issue 19): our code reaches Django, psycopg and channels_redis
through their public APIs, names no table by hand and sends no SQL of its own, except in the
adapter modules named here, each with the reason it needs to and a canary test of its own.

Checked on the source of every package we ship (not tests/ nor bench/, which measure and
inspect the database from outside; not migrations, which Django writes).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import channels_redis
import django
import psycopg
import pytest
from django.apps import apps

ROOT = Path(__file__).resolve().parents[1]
NOT_SHIPPED = {"tests", "bench", "docs", "deploy", "static", "templates", "locale", "var"}

ADAPTERS = {
    "base/bulk_update.py": "UPDATE ... FROM many rows' values: Django's bulk_update costs the "
    "controller about a hundred times as much CPU (tests/base/test_bulk_update.py)",
    "monitoring/rollups.py": "GPU samples folded into per-minute roll-ups with one upsert "
    "(INSERT ... ON CONFLICT DO UPDATE with sums and maxima), which the ORM cannot express; "
    "the batch-identity claim (INSERT ... ON CONFLICT DO UPDATE ... WHERE seq < excluded.seq "
    "RETURNING), one statement where the ORM needs three and a race",
    "base/redis_clients.py": "Django's Redis cache with one client per pool (its private "
    "`_client`, `_class`): half the CPU per cache read (tests/base/test_adapter_canaries.py)",
    "base/channel_layer.py": "channels_redis's layer with batched sends and one reader per "
    "process (its key layout and private helpers): a third less web CPU and p99 0.4 s against "
    "1-5 s in the live fan-out (tests/base/test_adapter_canaries.py)",
    "jobs/limits.py": "a submission's limits in one statement: 0.3 ms of the submitter's CPU "
    "against 4.1-4.5 ms for the ORM's reads (tests/jobs/test_limits.py)",
    "jobs/submission.py": "a submission's writes in two statements instead of five: the "
    "submitter's CPU per submission (tests/jobs/test_submission.py)",
    "base/rows.py": "rows of the hottest reads turned into model instances as the ORM does "
    "(`Model.from_db`), for statements written once: compiling them again cost 0.4-0.7 ms of "
    "CPU per request against 0.05 ms to run them (tests/tenants/test_tokens_read.py)",
    "tenants/tokens.py": "every API request's token and its user in one statement written "
    "once (base/rows.py; tests/tenants/test_tokens_read.py)",
    "tenants/me.py": "/api/v1/me/ in one statement written once: 0.9-1.5 ms of CPU against "
    "2.9-3.4 ms (tests/tenants/test_me.py)",
    "billing/rollup.py": "the daily usage roll-up: an upsert that adds to the row it meets "
    "(bulk_create's update_conflicts overwrites), and a REPEATABLE READ snapshot for reading it "
    "with the open segments (tests/billing/test_usage_rollup.py)",
}
"""Module: why it may use internals or send its own SQL. Keep this list short."""

DRIVERS = ("psycopg", "channels_redis")
"""Imported only by adapters: the ORM and the Channels layer API stand between."""

PUBLIC = {"_meta", "_db"}
"""Underscored, and documented as public API: a model's options, a custom manager's database."""

PRIVATE_CALLS = {
    r"\.from_db\(": "Django's row-to-instance constructor",
    r"\bconnection\.connection\b": "the driver's connection under Django's",
    r"\._meta\._\w+": "Django's private model options",
}
RAW_SQL = r"\.cursor\(|\bRawSQL\(|\.raw\(|\.extra\("


@cache
def _sources() -> dict[str, str]:
    """{path: source} of every module we ship."""
    found = {}
    for package in sorted(ROOT.iterdir()):
        if package.name in NOT_SHIPPED or not (package / "__init__.py").exists():
            continue
        for path in sorted(package.rglob("*.py")):
            if "migrations" not in path.parts:
                found[str(path.relative_to(ROOT))] = path.read_text()
    return found


_DEFINED = re.compile(r"\bdef (_[a-z]\w*)|\bself\.(_[a-z]\w*)\s*[:=]|^\s*(_[a-z]\w*)\s*[:=]", re.M)


def _defined_names(sources: list[str]) -> set[str]:
    """Private (single underscore) names these sources define for themselves."""
    return {next(g for g in m.groups() if g) for s in sources for m in _DEFINED.finditer(s)}


@cache
def _library_private_names() -> frozenset[str]:
    """Private attribute and method names Django, psycopg and channels_redis define."""
    roots = [Path(str(lib.__file__)).parent for lib in (django, psycopg, channels_redis)]
    sources = [p.read_text(errors="replace") for root in roots for p in root.rglob("*.py")]
    ours = _defined_names(list(_sources().values()))
    return frozenset(_defined_names(sources) - ours)


def _offences(path: str, source: str) -> list[str]:
    found = []
    private = _library_private_names()
    for match in re.finditer(r"(?<![\w.])(\w+)\.(_[a-z]\w*)\b", source):
        if match.group(2) in private - PUBLIC:
            found.append(f"{path}: {match.group(0)} (a library's private attribute)")
    for pattern, what in PRIVATE_CALLS.items():
        found += [f"{path}: {m.group(0)} ({what})" for m in re.finditer(pattern, source)]
    for driver in DRIVERS:
        if re.search(rf"^\s*(from|import) {driver}\b", source, re.M):
            found.append(f"{path}: imports {driver}")
    found += [f"{path}: {m.group(0)} (SQL of its own)" for m in re.finditer(RAW_SQL, source)]
    for table in _tables():
        if re.search(rf"\b{table}\b", source):
            found.append(f"{path}: names the table {table}")
    return found


@cache
def _tables() -> tuple[str, ...]:
    return tuple(sorted({model._meta.db_table for model in apps.get_models()}))


def test_only_the_named_adapters_use_internals_name_tables_or_send_sql() -> None:
    offences = [
        offence
        for path, source in _sources().items()
        if path not in ADAPTERS
        for offence in _offences(path, source)
    ]
    assert not offences, "\n".join(offences)


@pytest.mark.parametrize("path", sorted(ADAPTERS))
def test_every_named_adapter_still_needs_to_be_one(path: str) -> None:
    assert path in _sources(), f"{path} is gone: remove it from ADAPTERS"
    assert _offences(path, _sources()[path]), f"{path} uses no internals: remove it from ADAPTERS"


def test_the_check_finds_what_it_looks_for() -> None:
    # Guard against a check that finds nothing: each of these is an offence.
    for line in (
        "job._state.adding = False",
        "if not self._state.adding:",
        "GpuType.from_db(alias, names, values)",
        "raw = connection.connection",
        "import psycopg",
        "from channels_redis.core import RedisChannelLayer",
        "cursor = connection.cursor()",
        'sql = "SELECT id FROM jobs_job"',
    ):
        assert _offences("example.py", line), line
    assert not _offences("example.py", "self._rows = {}; Job._meta.db_table; job.pk")
