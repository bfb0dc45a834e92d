"""Settings from the environment: production refuses the demo secrets; secrets from *_FILE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from portal.env import env_bool, env_secret

ROOT = Path(__file__).resolve().parents[2]


# What a production deployment sets: real secrets and the host names it answers to.
PRODUCTION_ENV = {
    "PORTAL_MODE": "production",
    "SECRET_KEY": "9Lq-vS2xW7pZ_k4rT8mN3bH6yC1dF5gJ0aE9uR2iO7wQ4eX-Yt5Ub",
    "AUDIT_KEY": "audit-" + "7h3K9m2P5q8R1s4T6v9W" * 2,
    "ALLOWED_HOSTS": "portal.example.org",
}


def _load_settings(
    code: str = "import portal.settings", **env: str
) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-c", code], **env)


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    unset = {"SECRET_KEY", "AUDIT_KEY", "DB_PREPARE_AFTER", "ALLOWED_HOSTS", "DEBUG"}
    clean = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        argv,
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
        ALLOWED_HOSTS="portal.example.org",
    )
    assert result.returncode == 0, result.stderr


def test_production_refuses_to_start_without_allowed_hosts() -> None:
    result = _load_settings(**{**PRODUCTION_ENV, "ALLOWED_HOSTS": ""})
    assert result.returncode != 0
    assert "ALLOWED_HOSTS: production mode needs the host names" in result.stderr


def test_production_passes_the_deploy_check_without_a_warning() -> None:
    result = _run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        **PRODUCTION_ENV,
        SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


def test_production_trusts_the_proxys_scheme_header_only_when_configured() -> None:
    show = "import portal.settings as s; print(getattr(s, 'SECURE_PROXY_SSL_HEADER', None))"
    configured = _load_settings(show, **PRODUCTION_ENV, SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto")
    assert configured.stdout.strip() == "('HTTP_X_FORWARDED_PROTO', 'https')"
    assert _load_settings(show, **PRODUCTION_ENV).stdout.strip() == "None"


def test_x_forwarded_for_is_believed_only_behind_the_configured_proxies() -> None:
    show = "import portal.settings as s; print(s.REST_FRAMEWORK['NUM_PROXIES'])"
    assert _load_settings(show).stdout.strip() == "0"
    assert _load_settings(show, TRUSTED_PROXY_COUNT="2").stdout.strip() == "2"


def test_the_browsable_api_is_off_in_production() -> None:
    show = "import portal.settings as s; print(s.REST_FRAMEWORK['DEFAULT_RENDERER_CLASSES'])"
    production = _load_settings(show, **PRODUCTION_ENV)
    assert production.stdout.strip() == "['rest_framework.renderers.JSONRenderer']"
    assert "BrowsableAPIRenderer" in _load_settings(show).stdout


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
