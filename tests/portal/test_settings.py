"""Settings from the environment: production refuses the demo secrets; secrets from *_FILE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from portal.env import env_bool, env_secret

ROOT = Path(__file__).resolve().parents[2]


def _load_settings(
    code: str = "import portal.settings", **env: str
) -> subprocess.CompletedProcess[str]:
    unset = {"SECRET_KEY", "AUDIT_KEY", "DB_PREPARE_AFTER"}
    clean = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_refuses_the_demo_secrets() -> None:
    result = _load_settings(PORTAL_MODE="production")
    assert result.returncode != 0
    assert "SECRET_KEY: production mode needs a secret of at least 32 characters" in result.stderr


def test_production_starts_with_real_secrets_from_files(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("s" * 40 + "\n")
    (tmp_path / "audit").write_text("a" * 40)
    result = _load_settings(
        PORTAL_MODE="production",
        SECRET_KEY_FILE=str(tmp_path / "secret"),
        AUDIT_KEY_FILE=str(tmp_path / "audit"),
    )
    assert result.returncode == 0, result.stderr


def test_env_helpers_name_the_variable_on_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.core.exceptions import ImproperlyConfigured

    monkeypatch.setenv("SOME_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="SOME_FLAG: expected a boolean"):
        env_bool("SOME_FLAG")
    monkeypatch.setenv("SOME_SECRET_FILE", "/nonexistent/file")
    with pytest.raises(ImproperlyConfigured, match="SOME_SECRET_FILE: cannot read"):
        env_secret("SOME_SECRET", "x")


def test_postgresql_statements_are_prepared_unless_turned_off_for_poolers() -> None:
    show = "import portal.settings as s; print(s.DATABASES['default']['OPTIONS'])"
    url = "postgres://portal@127.0.0.1:5432/portal"

    def options(**env: str) -> str:
        result = _load_settings(show, DATABASE_URL=url, **env)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert "'server_side_binding': True, 'prepare_threshold': 5" in options()
    assert "'prepare_threshold': None" in options(DB_PREPARE_AFTER="0")
