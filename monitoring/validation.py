"""Checks a posted batch without touching the database; every error names its field."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from monitoring.schema import (
    BOOT_LENGTH,
    DRIVER,
    DRIVER_LENGTH,
    IB_DOWN_PORTS,
    IB_PORT_LENGTH,
    INDEX,
    INTERVAL,
    MAX_AGE_SECONDS,
    MAX_AHEAD_SECONDS,
    MAX_GPU_SAMPLES,
    MAX_IB_PORTS,
    MAX_XIDS,
    METRICS,
    NODE_METRICS,
    POD_LENGTH,
    SEQ,
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
    boot: str | None = None
    """The agent's start; with `seq`, the batch's identity on its node (None: an agent that
    sends none, whose resends cannot be told apart)."""
    seq: int | None = None
    host: dict[str, Any] | None = None
    """The node-level reading (driver, InfiniBand), as checked; None when the batch has none."""


def _number_ok(value: Any, bound: Bound) -> bool:
    # type(), not isinstance(): a bool is an int, and JSON gives plain ints and floats only.
    kind = type(value)
    if kind is float:
        if bound.integer and not value.is_integer():
            return False
    elif kind is not int:
        return False
    return bound.low <= value <= bound.high  # bounds are finite: NaN and infinities fail too


GPU_FIELDS = {"index": INDEX, **METRICS}
GPU_TEXTS = {"uuid": 64, "pod": POD_LENGTH}
XID_FIELDS = {"index": INDEX, "xid": XID}
XID_TEXTS = {"uuid": 64}
# The node-level reading's list of ports is bounded as one text: every name quoted, with ", ".
HOST_TEXTS = {DRIVER: DRIVER_LENGTH, IB_DOWN_PORTS: MAX_IB_PORTS * (IB_PORT_LENGTH + 4)}
DRIVER_VERSION = re.compile(r"[0-9A-Za-z._-]+")
IB_PORT_NAME = re.compile(r"[0-9A-Za-z._-]+/[0-9]{1,3}")

# The longest a bounded number is written in JSON: repr(-1.7976931348623157e+308).
NUMBER_CHARS = 24


def _entry_bytes(numbers: dict[str, Bound], texts: dict[str, int]) -> int:
    """The most bytes one valid entry takes as the agent writes it (`"key": value, ` with
    every field present and "at" besides, its texts ASCII: kubelet names and UUIDs are)."""
    keys = [*numbers, "at"]
    return (
        2
        + sum(len(k) + 6 + NUMBER_CHARS for k in keys)
        + sum(len(k) + 8 + length for k, length in texts.items())
    )


# What the largest valid batch takes, so a body beyond it is refused before it is parsed.
MAX_BODY_BYTES = (
    1024  # the envelope: node, interval, the lists' brackets
    + MAX_GPU_SAMPLES * (_entry_bytes(GPU_FIELDS, GPU_TEXTS) + 2)
    + MAX_XIDS * (_entry_bytes(XID_FIELDS, XID_TEXTS) + 2)
    + _entry_bytes(NODE_METRICS, HOST_TEXTS)
)


def _text_problem(key: str, value: Any, length: int) -> str | None:
    if key == IB_DOWN_PORTS:
        return _ports_problem(value)
    if not isinstance(value, str) or len(value) > length:
        return f"must be a string of at most {length} characters"
    if key == "pod" and value and value.count("/") != 1:
        return 'must be "namespace/name", or "" for a GPU no pod holds'
    if key == DRIVER and not DRIVER_VERSION.fullmatch(value):
        return 'must be a driver version such as "570.86.15" (letters, digits, ".", "-", "_")'
    return None


def _ports_problem(value: Any) -> str | None:
    if not isinstance(value, list) or len(value) > MAX_IB_PORTS:
        return f"must be a list of at most {MAX_IB_PORTS} port names"
    for name in value:
        if not (
            isinstance(name, str) and len(name) <= IB_PORT_LENGTH and IB_PORT_NAME.fullmatch(name)
        ):
            return f'must list ports as "device/port" of at most {IB_PORT_LENGTH} characters'
    return None


def _check_entry(
    entry: Any,
    where: str,
    known: dict[str, Bound],
    texts: dict[str, int],
    when: Bound,
    errors: Errors,
    required: tuple[str, ...] = ("index", "at"),
) -> None:
    if not isinstance(entry, dict):
        errors[where] = ["must be an object"]
        return
    for key, value in entry.items():
        if (bound := known.get(key)) is not None:
            if not _number_ok(value, bound):
                errors[f"{where}.{key}"] = [bound.message()]
        elif key == "at":
            if not _number_ok(value, when):
                errors[f"{where}.at"] = ["must be a Unix time within the last 6 hours"]
        elif key in texts:
            if (problem := _text_problem(key, value, texts[key])) is not None:
                errors[f"{where}.{key}"] = [problem]
        else:
            errors[f"{where}.{key}"] = ["unknown field"]
    for name in required:
        if name not in entry:
            errors[f"{where}.{name}"] = ["this field is required"]


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
    when = Bound(now - MAX_AGE_SECONDS, now + MAX_AHEAD_SECONDS)
    for i, entry in enumerate(gpus):
        _check_entry(entry, f"gpus[{i}]", GPU_FIELDS, GPU_TEXTS, when, errors)
    for i, entry in enumerate(xids):
        _check_entry(entry, f"xids[{i}]", XID_FIELDS, XID_TEXTS, when, errors)
        if isinstance(entry, dict) and "xid" not in entry:
            errors[f"xids[{i}].xid"] = ["this field is required"]
    if "host" in data:
        _check_entry(data["host"], "host", NODE_METRICS, HOST_TEXTS, when, errors, ("at",))
    _check_identity(data, errors)
    for key in set(data) - {"node", "boot", "seq", "interval", "gpus", "xids", "host"}:
        errors[key] = ["unknown field"]
    if errors:
        return None, errors
    by_time = sorted(gpus, key=lambda g: g["at"])
    xids_by_time = sorted(xids, key=lambda x: x["at"])
    seq = int(data["seq"]) if "seq" in data else None
    batch = Batch(
        data.get("node"),
        float(data["interval"]),
        by_time,
        xids_by_time,
        data.get("boot"),
        seq,
        data.get("host"),
    )
    return batch, {}


def _check_identity(data: dict[str, Any], errors: Errors) -> None:
    """`boot` and `seq` come together or not at all."""
    if "boot" not in data and "seq" not in data:
        return
    boot = data.get("boot")
    if not isinstance(boot, str) or not 0 < len(boot) <= BOOT_LENGTH:
        errors["boot"] = [f"must be a string of 1 to {BOOT_LENGTH} characters, with seq"]
    if not _number_ok(data.get("seq"), SEQ):
        errors["seq"] = [f"{SEQ.message()}, with boot"]


def node_errors(named: Any, node: str) -> Errors:
    """A node posts for itself only: `named` is the body's `node`, `node` the token's."""
    return {} if named == node else {"node": [f"must be this token's node, {node!r}"]}
