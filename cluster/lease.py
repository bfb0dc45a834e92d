"""The controller's leader lease, held in the database.

One conditional UPDATE takes or renews it: it succeeds only for the current holder or once the
lease has expired, so two controllers never both believe they lead. A standby polls and takes
over within one TTL of the leader's last renewal.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from cluster.models import Lease

NAME = "controller"
TTL = timedelta(seconds=10)


def try_acquire(holder: str, ttl: timedelta = TTL) -> bool:
    """Take or renew the lease; True while `holder` leads."""
    now = timezone.now()
    taken = Lease.objects.filter(Q(holder=holder) | Q(expires_at__lt=now), name=NAME).update(
        holder=holder, expires_at=now + ttl
    )
    if taken:
        Lease.objects.filter(name=NAME, holder=holder, acquired_at__lt=now - ttl).update(
            acquired_at=now
        )
        return True
    try:
        with transaction.atomic():
            Lease.objects.create(name=NAME, holder=holder, expires_at=now + ttl, acquired_at=now)
        return True
    except IntegrityError:  # someone else holds it
        return False


def still_leading(holder: str) -> bool:
    """Checked inside each applying transaction: a leader that lost its lease stops acting."""
    return Lease.objects.filter(name=NAME, holder=holder, expires_at__gt=timezone.now()).exists()


def release(holder: str) -> None:
    Lease.objects.filter(name=NAME, holder=holder).update(expires_at=timezone.now())
