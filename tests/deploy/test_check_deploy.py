"""`manage.py check --deploy` is clean under production settings, as the manifests set them.

Settings are read once per process, so the check runs in its own, with the production
overlay's configuration (PORTAL_MODE, the proxy header, the trusted proxy) and fresh secrets.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

from tests.deploy.conftest import ROOT, Obj, of_kind


def test_check_deploy_is_clean_in_production_mode(rendered: list[Obj]) -> None:
    (configmap,) = of_kind(rendered, "ConfigMap")
    config: dict[str, str] = dict(configmap["data"])
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DEBUG", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS"}
    }
    env |= config | {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "AUDIT_KEY": secrets.token_urlsafe(32),
        "ALLOWED_HOSTS": config["PORTAL_HOST"],
        "CSRF_TRUSTED_ORIGINS": f"https://{config['PORTAL_HOST']}",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert config["PORTAL_MODE"] == "production"
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout
