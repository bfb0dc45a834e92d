"""Downward API volumes: the files a pod's containers see, worked out from the pod's metadata.

As the kubelet does, a file follows the pod: an annotation patched onto a running pod shows in
its file (kubesim rewrites it at once; a real kubelet within its sync period). A missing
annotation or label reads as an empty file.
"""

from __future__ import annotations

import re
from typing import Any

Obj = dict[str, Any]
_KEYED = re.compile(r"^metadata\.(annotations|labels)\['([^']+)'\]$")
_PLAIN = {"metadata.name": "name", "metadata.namespace": "namespace", "metadata.uid": "uid"}


def field_value(pod: Obj, path: str) -> str:
    meta = pod["metadata"]
    keyed = _KEYED.match(path)
    if keyed:
        return str((meta.get(keyed.group(1)) or {}).get(keyed.group(2), ""))
    if path in _PLAIN:
        return str(meta.get(_PLAIN[path], ""))
    return ""


def files(pod: Obj) -> dict[str, str]:
    """Path -> content of every downward API file mounted into the pod's containers."""
    volumes = {
        v["name"]: v["downwardAPI"].get("items") or []
        for v in pod["spec"].get("volumes") or []
        if "downwardAPI" in v
    }
    found: dict[str, str] = {}
    for container in pod["spec"].get("containers") or []:
        for mount in container.get("volumeMounts") or []:
            for item in volumes.get(mount["name"], []):
                path = f"{mount['mountPath'].rstrip('/')}/{item['path']}"
                found[path] = field_value(pod, item.get("fieldRef", {}).get("fieldPath", ""))
    return found
