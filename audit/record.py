"""`record()`: append one event to the chain, inside the caller's transaction.

The head row is updated first: on PostgreSQL that takes its row lock, on SQLite (IMMEDIATE
transactions) the write lock is already held, so concurrent writers line up and never fork the
chain. A rolled-back action rolls its audit event and the head back with it.

Inside `batch()` (the controller applying hundreds of changes in one transaction) the events
are chained and written together when the block ends: one head advance for all of them, which
also holds the head's lock for the shortest time. Opened outside the transaction's other held
writes (`portal.bulk.together`), it takes the lock only once those are sent: every submission
waits for that lock, and it used to wait through the controller's largest writes too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from audit.chain import event_hash
from audit.models import GENESIS_HASH, AuditEvent, AuditHead
from portal.bulk import execute_later, insert_rows, together
from portal.middleware import current_request_context

if TYPE_CHECKING:
    from tenants.models import Team
    from tenants.scoping import AnyUser


class AuditOutsideTransaction(RuntimeError):
    """An audit event must commit or roll back with the change it describes."""


def snapshot(value: Any) -> Any:
    """A JSON-safe copy, so the stored value reads back as it was hashed (see `chain.as_stored`).

    Infinities and NaN, which JSON cannot carry (PostgreSQL refuses them, the bulk writer
    makes them null), are kept as text.
    """
    if value is None:
        return None
    return json.loads(json.dumps(value, default=str), parse_constant=str)


def _target(target: models.Model | tuple[str, str] | None) -> tuple[str, str]:
    if target is None:
        return "", ""
    if isinstance(target, tuple):
        return target
    return target._meta.label_lower, str(target.pk)


def _advance_head(count: int) -> tuple[int, str]:
    """Take `count` sequence numbers and the previous hash in one locking statement.

    Returns the first number taken and the hash the first event links to.
    """
    table = AuditHead._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET seq = seq + %s WHERE id = 1 RETURNING seq, hash", [count]
        )
        row = cursor.fetchone()
    if row is not None:
        return int(row[0]) - count + 1, str(row[1])
    # The migration creates the head; this covers a database emptied since (test flushes).
    try:
        with transaction.atomic():
            AuditHead.objects.create(pk=1, seq=count)
        return 1, GENESIS_HASH
    except IntegrityError:  # another writer created it first: take our turn after it
        return _advance_head(count)


def _append(events: list[AuditEvent]) -> None:
    seq, prev_hash = _advance_head(len(events))
    for event in events:
        event.seq, event.prev_hash = seq, prev_hash
        event.hash = prev_hash = event_hash(event, prev_hash)
        seq += 1
    # These two go in one round trip (with the rest of a submission, inside its `together()`),
    # and the head's lock is released at the commit right after.
    with together():
        insert_rows(events)
        execute_later(f"UPDATE {AuditHead._meta.db_table} SET hash = %s WHERE id = 1", [prev_hash])


_pending: ContextVar[list[AuditEvent] | None] = ContextVar("audit_batch", default=None)


@contextmanager
def batch() -> Iterator[None]:
    """Chain and write the events recorded inside together when the block ends.

    Open it inside the transaction the changes are made in; after an exception nothing is
    written (the transaction rolls back anyway). Inside an outer batch this joins it.
    """
    if _pending.get() is not None:
        yield
        return
    events: list[AuditEvent] = []
    token = _pending.set(events)
    try:
        yield
        if events:
            _append(events)
    finally:
        _pending.reset(token)


def record(
    action: str,
    *,
    actor: AnyUser | None,
    team: Team | None,
    target: models.Model | tuple[str, str] | None = None,
    before: Any = None,
    after: Any = None,
) -> AuditEvent:
    if not connection.in_atomic_block:
        raise AuditOutsideTransaction(f"audit event {action!r} written outside a transaction")
    context = current_request_context()
    target_type, target_id = _target(target)
    actor_known = actor is not None and actor.is_authenticated
    event = AuditEvent(
        at=timezone.now(),
        actor_id=actor.pk if actor_known and actor else None,
        actor_name=actor.get_username() if actor_known and actor else "",
        team_id=team.pk if team else None,
        team_slug=team.slug if team else "",
        action=action,
        target_type=target_type,
        target_id=target_id,
        before=snapshot(before),
        after=snapshot(after),
        request_id=context.request_id if context else "",
        ip=(context.ip or "") if context else "",
    )
    pending = _pending.get()
    if pending is not None:
        pending.append(event)  # numbered and chained when the batch ends
    else:
        _append([event])
    return event
