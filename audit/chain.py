"""Writing and verifying the chain: hash = HMAC-SHA256(key, prev_hash || canonical_json(event))."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings

from audit.models import GENESIS_HASH, AuditEvent

if TYPE_CHECKING:
    from audit.checkpoints import Checkpoint

HASHED_FIELDS = (
    "seq",
    "at",
    "actor_id",
    "actor_name",
    "team_id",
    "team_slug",
    "action",
    "target_type",
    "target_id",
    "before",
    "after",
    "request_id",
    "ip",
)


def _float_as_stored(value: float) -> float | int:
    if value == 0:
        return 0.0  # -0.0 too: a decimal has no sign on zero
    if value.is_integer() and abs(value) >= 1e16:  # json writes these with an exponent
        return int(Decimal(repr(value)))
    return value


def as_stored(value: Any) -> Any:
    """`value` with its numbers in the form PostgreSQL's jsonb gives them back.

    jsonb keeps a number as a decimal and prints it without exponent: a fair-share weight of
    1e16 reads back as the integer 10000000000000000, 1e308 as 1 and 308 zeros, -0.0 as 0.0.
    Hashed as written, such a value broke the chain from its row on; hashed in this form it
    hashes alike before and after the round trip, on every database.
    """
    if isinstance(value, float) and math.isfinite(value):
        return _float_as_stored(value)
    if isinstance(value, dict):
        return {key: as_stored(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_stored(item) for item in value]
    return value


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def event_hash(event: AuditEvent, prev_hash: str) -> str:
    fields = {name: getattr(event, name) for name in HASHED_FIELDS}
    fields["at"] = event.at.isoformat()
    # The other fields are typed columns; only these JSON values change form in the database.
    fields["before"], fields["after"] = as_stored(event.before), as_stored(event.after)
    message = prev_hash.encode() + canonical_json(fields).encode()
    return hmac.new(settings.AUDIT_KEY.encode(), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Verdict:
    checked: int
    anchored: int  # rows up to the checkpoint's seq; those after it are not anchored yet


def _row_problems(event: AuditEvent, expected_seq: int, prev_hash: str) -> list[str]:
    problems = []
    if event.seq != expected_seq:
        missing = event.seq - expected_seq
        problems.append(
            f"expected seq={expected_seq}, "
            + ("a row is missing" if missing == 1 else f"{missing} rows are missing")
        )
    elif event.prev_hash != prev_hash:  # after missing rows it cannot match: said above
        problems.append("prev_hash does not match the previous row")
    if not hmac.compare_digest(event.hash, event_hash(event, event.prev_hash)):
        problems.append("contents were changed after writing")
    return problems


def _head_problems(last_seq: int, last_hash: str, head: tuple[int, str]) -> list[str]:
    head_seq, head_hash = head
    if last_seq != head_seq:
        return [f"chain ends at seq={last_seq} but the head says seq={head_seq}"]
    if last_hash != head_hash:
        return [f"seq={last_seq}: the head's hash differs from the row's"]
    return []


def verify(
    events: Iterable[AuditEvent],
    head: tuple[int, str],
    checkpoint: Checkpoint | None,
    report: Callable[[str], None],
) -> Verdict:
    """Walk events in sequence order and report every link that does not hold, by its seq.

    A broken row does not stop the walk: the next row is checked against what this one stores,
    so tampering further on is named too. The end of the chain is checked against the head and
    against the latest checkpoint, which the database cannot rewind.
    """
    prev_hash, expected_seq, checked, anchored = GENESIS_HASH, 1, 0, 0
    anchored_hash: str | None = None
    for event in events:
        problems = _row_problems(event, expected_seq, prev_hash)
        if problems:
            where = f"event seq={event.seq} (id={event.pk}, action={event.action})"
            report(f"{where}: {'; '.join(problems)}")
        if checkpoint is not None and event.seq <= checkpoint.seq:
            anchored += 1
            if event.seq == checkpoint.seq:
                anchored_hash = event.hash
        prev_hash, expected_seq, checked = event.hash, event.seq + 1, checked + 1
    last_seq = expected_seq - 1
    ends = _head_problems(last_seq, prev_hash, head)
    if checkpoint is not None:
        ends += checkpoint_problems(checkpoint, last_seq, anchored_hash)
    for end in ends:
        report(end)
    return Verdict(checked, anchored)


def checkpoint_problems(
    checkpoint: Checkpoint, last_seq: int, anchored_hash: str | None
) -> list[str]:
    """A checkpoint beyond the chain's end means rows were removed; another hash at its seq
    means the chain was rewritten from there (truncated, then written on)."""
    if checkpoint.seq > last_seq:
        problem = (
            f"the checkpoint anchors seq={checkpoint.seq} but the chain ends at seq={last_seq}"
        )
        return [f"{problem}: rows were removed"]
    if anchored_hash != checkpoint.hash:
        return [
            f"seq={checkpoint.seq}: differs from the checkpoint of {checkpoint.at.isoformat()}: "
            "the chain was rewritten from there"
        ]
    return []
