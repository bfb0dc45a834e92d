"""A minimal OpenAPI v3: enough for kubectl to see that each resource's PATCH accepts
`fieldValidation`, so `kubectl apply` leaves validation to the server and computes strategic merge
patches from its compiled-in types. No schemas are served (kubesim does not reject unknown fields).
"""

from __future__ import annotations

import hashlib
from typing import Any

from kubesim.errors import ApiError
from kubesim.resources import RESOURCES, Resource, groups

Obj = dict[str, Any]


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _item_path(r: Resource) -> str:
    base = "/" + _gv_path(r.group, r.version)
    return (
        f"{base}/namespaces/{{namespace}}/{r.plural}/{{name}}"
        if r.namespaced
        else f"{base}/{r.plural}/{{name}}"
    )


def _patch_operation(r: Resource) -> Obj:
    return {
        "operationId": f"patch{r.kind}",
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
        "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
        "requestBody": {
            "content": {
                "application/json-patch+json": {"schema": {"type": "object"}},
                "application/merge-patch+json": {"schema": {"type": "object"}},
            }
        },
        "responses": {"200": {"description": "OK"}},
    }


def _group_versions() -> list[tuple[str, str]]:
    return [("", "v1")] + [(g, v) for g, versions in sorted(groups().items()) for v in versions]


def _gv_document(group: str, version: str) -> Obj:
    paths = {
        _item_path(r): {"patch": _patch_operation(r)}
        for r in RESOURCES
        if (r.group, r.version) == (group, version)
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0-kubesim"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def document(path: str) -> Obj:
    if path == "/openapi/v3":
        entries = {}
        for group, version in _group_versions():
            key = _gv_path(group, version)
            digest = hashlib.sha256(key.encode()).hexdigest()[:32].upper()
            entries[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
        return {"paths": entries}
    for group, version in _group_versions():
        if path == f"/openapi/v3/{_gv_path(group, version)}":
            return _gv_document(group, version)
    raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
