"""The three PATCH flavours clients send: JSON patch, JSON merge patch and strategic merge patch.

Strategic merge is the subset kubectl and the official client use: lists with a merge key
(containers by name, conditions by type, ...) merge element-wise, `$patch: delete|replace`,
`$retainKeys`, and `$setElementOrder/<field>` (kubectl apply sends it; order is kept as given).
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.errors import ApiError, bad_request

MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "addresses": "type",
}
MERGED_SCALAR_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _merge_list(field: str, target: list[Any], patch: list[Any]) -> list[Any]:
    if field in MERGED_SCALAR_LISTS:
        return target + [v for v in patch if v not in target]
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(v, dict) for v in patch):
        return [v for v in patch if not (isinstance(v, dict) and "$patch" in v)]
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [v for v in patch if not (isinstance(v, dict) and "$patch" in v)]
    result = [copy.deepcopy(v) for v in target]
    for item in patch:
        index = next((i for i, v in enumerate(result) if v.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(strategic_merge({}, item))
        else:
            result[index] = strategic_merge(result[index], item)
    return result


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(key, result[key], value)
        elif isinstance(value, list):
            result[key] = _merge_list(key, [], value)
        else:
            result[key] = strategic_merge(result.get(key), value)
    if retain is not None:
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    for part in parts[:-1]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _apply_op(doc: Any, op: dict[str, Any]) -> Any:
    kind, parts = op.get("op"), _pointer(op.get("path", ""))
    parent, last = _parent(doc, parts), parts[-1]
    if kind == "test":
        current = parent[int(last)] if isinstance(parent, list) else parent[last]
        if current != op.get("value"):
            raise ApiError(422, "Invalid", f"the test operation failed at {op['path']}")
    elif kind in ("remove", "replace"):
        current = parent[int(last)] if isinstance(parent, list) else parent[last]
        if kind == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            parent[int(last) if isinstance(parent, list) else last] = op["value"]
        return current
    elif kind == "add":
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), op["value"])
        else:
            parent[last] = op["value"]
    elif kind in ("move", "copy"):
        source = _pointer(op["from"])
        src_parent = _parent(doc, source)
        value = (
            src_parent[int(source[-1])] if isinstance(src_parent, list) else src_parent[source[-1]]
        )
        if kind == "move":
            _apply_op(doc, {"op": "remove", "path": op["from"]})
        _apply_op(doc, {"op": "add", "path": op["path"], "value": copy.deepcopy(value)})
    else:
        raise bad_request(f"unexpected JSON patch operation: {kind!r}")
    return None


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902; a path that does not exist is a 422 as on the real server."""
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        try:
            _apply_op(doc, op)
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise ApiError(
                422,
                "Invalid",
                f"the server rejected our request due to an error in "
                f"our request: {op.get('op')} {op.get('path')}: {exc!r}",
            ) from exc
    return doc


def apply_patch(target: Any, body: Any, content_type: str) -> Any:
    if content_type.startswith("application/json-patch+json"):
        return json_patch(target, body)
    if content_type.startswith("application/merge-patch+json"):
        return merge_patch(target, body)
    if content_type.startswith("application/strategic-merge-patch+json"):
        return strategic_merge(target, body)
    raise ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown "
        f"format - accepted media types include: application/json-patch+json, "
        f"application/merge-patch+json, application/strategic-merge-patch+json "
        f"(got {content_type})",
    )
