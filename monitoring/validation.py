"""Checks a posted batch without touching the database; every error names its field."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from monitoring.schema import (
    INDEX,
    INTERVAL,
    MAX_AGE_SECONDS,
    MAX_AHEAD_SECONDS,
    MAX_GPU_SAMPLES,
    MAX_XIDS,
    METRICS,
    POD_LENGTH,
    XID,
    Bound,
)

Errors = dict[str, list[str]]


@dataclass(frozen=True)
class Batch:
    """A valid batch: GPU samples (plain dicts, as checked) and Xid events, oldest first."""

    node: Any  # as the body names it: see `node_errors`
    interval: float
    gpus: list[dict[str, Any]]
    xids: list[dict[str, Any]]


def _number_ok(value: Any, bound: Bound) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if bound.integer and not (isinstance(value, int) or float(value).is_integer()):
        return False
    return math.isfinite(value) and bound.low <= value <= bound.high


def _time_ok(value: Any, now: float) -> bool:
    bound = Bound(now - MAX_AGE_SECONDS, now + MAX_AHEAD_SECONDS)
    return _number_ok(value, bound)


GPU_TEXTS = {"uuid": 64, "pod": POD_LENGTH}
XID_TEXTS = {"uuid": 64}


def _check_entry(
    entry: Any,
    where: str,
    known: dict[str, Bound],
    texts: dict[str, int],
    now: float,
    errors: Errors,
) -> None:
    if not isinstance(entry, dict):
        errors[where] = ["must be an object"]
        return
    for key, value in entry.items():
        field = f"{where}.{key}"
        if key == "at":
            if not _time_ok(value, now):
                errors[field] = ["must be a Unix time within the last 6 hours"]
        elif key in texts:
            if not isinstance(value, str) or len(value) > texts[key]:
                errors[field] = [f"must be a string of at most {texts[key]} characters"]
            elif key == "pod" and value and value.count("/") != 1:
                errors[field] = ['must be "namespace/name", or "" for a GPU no pod holds']
        elif key in known:
            if not _number_ok(value, known[key]):
                errors[field] = [known[key].message()]
        else:
            errors[field] = ["unknown field"]
    for required in ("index", "at"):
        if required not in entry:
            errors[f"{where}.{required}"] = ["this field is required"]


def _check_list(data: dict[str, Any], key: str, limit: int, errors: Errors) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        errors[key] = ["must be a list"]
        return []
    if len(value) > limit:
        errors[key] = [f"at most {limit} entries per post, got {len(value)}"]
        return []
    return value


def validate_batch(data: Any, now: float | None = None) -> tuple[Batch | None, Errors]:
    """The batch, or the errors. Whether `node` is the token's node is checked apart
    (`node_errors`), once the token is known."""
    now = time.time() if now is None else now
    if not isinstance(data, dict):
        return None, {"non_field_errors": ["expected a JSON object"]}
    errors: Errors = {}
    interval = data.get("interval")
    if not _number_ok(interval, INTERVAL):
        errors["interval"] = [INTERVAL.message()]
    gpus = _check_list(data, "gpus", MAX_GPU_SAMPLES, errors)
    xids = _check_list(data, "xids", MAX_XIDS, errors)
    gpu_fields = {"index": INDEX, **METRICS}
    for i, entry in enumerate(gpus):
        _check_entry(entry, f"gpus[{i}]", gpu_fields, GPU_TEXTS, now, errors)
    for i, entry in enumerate(xids):
        _check_entry(entry, f"xids[{i}]", {"index": INDEX, "xid": XID}, XID_TEXTS, now, errors)
        if isinstance(entry, dict) and "xid" not in entry:
            errors[f"xids[{i}].xid"] = ["this field is required"]
    for key in set(data) - {"node", "interval", "gpus", "xids"}:
        errors[key] = ["unknown field"]
    if errors:
        return None, errors
    by_time = sorted(gpus, key=lambda g: g["at"])
    xids_by_time = sorted(xids, key=lambda x: x["at"])
    return Batch(data.get("node"), float(data["interval"]), by_time, xids_by_time), {}


def node_errors(named: Any, node: str) -> Errors:
    """A node posts for itself only: `named` is the body's `node`, `node` the token's."""
    return {} if named == node else {"node": [f"must be this token's node, {node!r}"]}
