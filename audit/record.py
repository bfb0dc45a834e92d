"""`record()`: append one event to the chain, inside the caller's transaction.

`append` locks the chain's head row (`select_for_update`; on SQLite the IMMEDIATE transaction
holds the write lock already), so concurrent writers line up and never fork the chain, and
the lock is held until the transaction ends: a writer that moves many rows appends its events
last (`jobs.states.Moves.flush`). A rolled-back action rolls its audit event and the head back
with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from audit.chain import event_hash
from audit.models import AuditEvent, AuditHead
from base.middleware import current_request_context

if TYPE_CHECKING:
    from tenants.models import Team
    from tenants.scoping import AnyUser


BATCH_EVENTS = 500
"""Rows per INSERT: PostgreSQL binds at most 65,535 values in one statement."""


class AuditOutsideTransaction(RuntimeError):
    """An audit event must commit or roll back with the change it describes."""


def snapshot(value: Any) -> Any:
    """A JSON-safe copy, so the stored value reads back as it was hashed (see `chain.as_stored`).

    Infinities and NaN, which JSON cannot carry (PostgreSQL refuses them), are kept as text.
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


def lock_head() -> AuditHead:
    """The chain's head, locked until the transaction ends."""
    head = AuditHead.objects.select_for_update().filter(pk=1).first()
    if head is not None:
        return head
    # The migration creates the head; this covers a database emptied since (test flushes).
    try:
        with transaction.atomic():
            AuditHead.objects.create(pk=1)
    except IntegrityError:  # another writer created it first: take our turn after it
        pass
    return lock_head()


def chain(head: AuditHead, events: Sequence[AuditEvent]) -> None:
    """Number and hash `events` after `head`, in this order, and move `head` (in memory) past
    them. The caller holds the head's lock and writes both before it ends."""
    for event in events:
        head.seq += 1
        event.seq, event.prev_hash = head.seq, head.hash
        event.hash = head.hash = event_hash(event, head.hash)


def append(events: Sequence[AuditEvent]) -> None:
    """Chain `events` (built by `audit_event`, in this order) after the head and write them,
    in the caller's transaction: the head stays locked until it ends."""
    if not events:
        return
    require_transaction(events[0])
    head = lock_head()
    chain(head, events)
    AuditEvent.chain.bulk_create(events, batch_size=BATCH_EVENTS)
    head.save(update_fields=["seq", "hash"])


def require_transaction(event: AuditEvent) -> None:
    if not connection.in_atomic_block:
        raise AuditOutsideTransaction(f"audit event {event.action!r} written outside a transaction")


def audit_event(
    action: str,
    *,
    actor: AnyUser | None,
    team: Team | None,
    target: models.Model | tuple[str, str] | None = None,
    before: Any = None,
    after: Any = None,
) -> AuditEvent:
    """One event, not yet chained: `append` numbers, hashes and writes it."""
    context = current_request_context()
    target_type, target_id = _target(target)
    actor_known = actor is not None and actor.is_authenticated
    return AuditEvent(
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


def record(
    action: str,
    *,
    actor: AnyUser | None,
    team: Team | None,
    target: models.Model | tuple[str, str] | None = None,
    before: Any = None,
    after: Any = None,
) -> AuditEvent:
    """Append one event to the chain now, inside the caller's transaction."""
    event = audit_event(action, actor=actor, team=team, target=target, before=before, after=after)
    append([event])
    return event
