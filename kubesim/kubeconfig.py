"""The kubeconfig that points the official client and kubectl at a kubesim server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CONTEXT = "kubesim"


def kubeconfig(url: str, token: str | None, namespace: str = "default") -> dict[str, Any]:
    user: dict[str, Any] = {"token": token} if token else {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT, "user": user}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(path: str | Path, url: str, token: str | None) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig(url, token), sort_keys=False))
    target.chmod(0o600)
    return target
