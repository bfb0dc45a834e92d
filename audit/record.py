"""`record()`: append one event to the chain, inside the caller's transaction.

The head row is updated first: on PostgreSQL that takes its row lock, on SQLite (IMMEDIATE
transactions) the write lock is already held, so concurrent writers line up and never fork the
chain. A rolled-back action rolls its audit event and the head back with it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from audit.chain import event_hash
from audit.models import GENESIS_HASH, AuditEvent, AuditHead
from portal.middleware import current_request_context

if TYPE_CHECKING:
    from tenants.models import Team
    from tenants.scoping import AnyUser


class AuditOutsideTransaction(RuntimeError):
    """An audit event must commit or roll back with the change it describes."""


def snapshot(value: Any) -> Any:
    """A JSON-safe copy, so the stored value reads back exactly as it was hashed."""
    return json.loads(json.dumps(value, default=str)) if value is not None else None


def _target(target: models.Model | tuple[str, str] | None) -> tuple[str, str]:
    if target is None:
        return "", ""
    if isinstance(target, tuple):
        return target
    return target._meta.label_lower, str(target.pk)


def _advance_head() -> tuple[int, str]:
    """Take the next sequence number and the previous hash in one locking statement."""
    table = AuditHead._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash")
        row = cursor.fetchone()
    if row is not None:
        return int(row[0]), str(row[1])
    # The migration creates the head; this covers a database emptied since (test flushes).
    try:
        with transaction.atomic():
            AuditHead.objects.create(pk=1, seq=1)
        return 1, GENESIS_HASH
    except IntegrityError:  # another writer created it first: take our turn after it
        return _advance_head()


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
    seq, prev_hash = _advance_head()
    context = current_request_context()
    target_type, target_id = _target(target)
    actor_known = actor is not None and actor.is_authenticated
    event = AuditEvent(
        seq=seq,
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
        prev_hash=prev_hash,
    )
    event.hash = event_hash(event, prev_hash)
    event.save()
    AuditHead.objects.filter(pk=1).update(hash=event.hash)
    return event
