"""What the PostgreSQL benches share: their environment, and a fresh database of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def environment(database: str, **settings: str) -> dict[str, str]:
    """This process's environment for a bench on its own database (BENCH_DATABASE_URL
    overrides), on the embedded channel layer and cache (no Redis), plus `settings`."""
    url = os.environ.get("BENCH_DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{database}")
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "LOG_LEVEL": "WARNING",
        "DEBUG": "0",
    }
    env.pop("REDIS_URL", None)
    return env | settings


def use_environment(database: str, **settings: str) -> None:
    """Make `environment()` this process's own, for it and the processes it starts."""
    env = environment(database, **settings)
    os.environ.clear()
    os.environ.update(env)


def fresh_database(database: str, env: Mapping[str, str] | None = None) -> None:
    """Drop and create the bench's database on 127.0.0.1, then migrate it."""
    for sql in (f"DROP DATABASE IF EXISTS {database}", f"CREATE DATABASE {database}"):
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c", sql], check=True)
    manage = [sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"]
    subprocess.run(manage, check=True, cwd=ROOT, env=env)
