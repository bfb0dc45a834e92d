"""Writing and verifying the chain: hash = HMAC-SHA256(key, prev_hash || canonical_json(event))."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from audit.models import GENESIS_HASH, AuditEvent

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


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def event_hash(event: AuditEvent, prev_hash: str) -> str:
    fields = {name: getattr(event, name) for name in HASHED_FIELDS}
    fields["at"] = event.at.isoformat()
    message = prev_hash.encode() + canonical_json(fields).encode()
    return hmac.new(settings.AUDIT_KEY.encode(), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Verdict:
    ok: bool
    checked: int
    problem: str = ""


def verify(events: Iterable[AuditEvent], head_seq: int, head_hash: str) -> Verdict:
    """Walk events in sequence order; name the first row whose link does not hold."""
    prev_hash, expected_seq, checked = GENESIS_HASH, 1, 0
    for event in events:
        where = f"event seq={event.seq} (id={event.pk}, action={event.action})"
        if event.seq != expected_seq:
            return Verdict(
                False, checked, f"{where}: expected seq={expected_seq}, a row is missing"
            )
        if event.prev_hash != prev_hash:
            return Verdict(False, checked, f"{where}: prev_hash does not match the previous row")
        if not hmac.compare_digest(event.hash, event_hash(event, prev_hash)):
            return Verdict(False, checked, f"{where}: contents were changed after writing")
        prev_hash, expected_seq, checked = event.hash, expected_seq + 1, checked + 1
    if checked != head_seq or prev_hash != head_hash:
        return Verdict(
            False, checked, f"chain ends at seq={checked} but the head says seq={head_seq}"
        )
    return Verdict(True, checked)
