"""The controller's leader lease, held in the database, and the fence on the leader's writes.

One conditional UPDATE takes or renews it: it succeeds only for the current holder or once the
lease has expired, so two controllers never both believe they lead. A standby polls and takes
over within one TTL of the leader's last renewal. Expiry is judged by the database's clock
(`Now()`), never by a host's: a standby whose clock runs ahead must not take a fresh lease.

Believing is not enough: a leader that stalled past its TTL (a long pause, a slow statement)
would still write after its standby took over. So every transaction the controller writes in
starts with `hold()`: it locks the lease row and checks, by the database's clock, that this
controller still holds it. A standby's takeover (an UPDATE of that row) waits for the leader's
open transaction to end, and once it has taken the lease, the stale leader's next transaction
finds it gone and rolls back. On SQLite the writing transaction holds the write lock from its
start (IMMEDIATE), which serialises it with the takeover in the same way.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, When
from django.db.models.functions import Now

from cluster.models import Lease

NAME = "controller"
TTL = timedelta(seconds=10)


class Lost(Exception):
    """This controller no longer holds the lease: what it was writing must not commit."""


def try_acquire(holder: str, ttl: timedelta = TTL) -> bool:
    """Take or renew the lease; True while `holder` leads."""
    taken = Lease.objects.filter(Q(holder=holder) | Q(expires_at__lt=Now()), name=NAME).update(
        holder=holder,
        expires_at=Now() + ttl,
        acquired_at=Case(When(holder=holder, then=F("acquired_at")), default=Now()),
    )
    if taken:
        return True
    try:
        with transaction.atomic():
            Lease.objects.create(
                name=NAME, holder=holder, expires_at=Now() + ttl, acquired_at=Now()
            )
        return True
    except IntegrityError:  # someone else holds it
        return False


def hold(holder: str) -> None:
    """Inside a writing transaction: lock the lease row until it ends; raise `Lost` unless
    `holder` still holds an unexpired lease."""
    held = Lease.objects.select_for_update().filter(name=NAME, holder=holder, expires_at__gt=Now())
    if not held.values_list("pk", flat=True):
        raise Lost(f"controller {holder} no longer holds the lease")


def release(holder: str) -> None:
    Lease.objects.filter(name=NAME, holder=holder).update(expires_at=Now())
