"""`notify` and `notify_admins`: the public API other apps call, inside their own transaction.

In-portal notifications are written at once (they commit or roll back with the caller's change);
emails and webhooks go out through Celery once it commits, one task per delivery, so a channel
that fails never holds up the others.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from notifications.models import (
    Channel,
    ChannelKind,
    Delivery,
    EmailPreference,
    Level,
    Notification,
    at_least,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tenants.models import Team

log = logging.getLogger(__name__)
DEFAULT_EMAIL_LEVEL = Level.WARNING


def notify(
    users: Iterable[User],
    *,
    level: str,
    title: str,
    body: str = "",
    link: str = "",
    dedupe_key: str = "",
    team: Team | None = None,
    admins_channels: bool = False,
) -> list[Notification]:
    """Tell `users` in the portal and by email (each from their own level up), and send it to
    `team`'s channels (and the platform admins' with `admins_channels`) from theirs up.
    With `dedupe_key`, a user who has an unread notification of that key gets no other."""
    level = Level(level)
    people = {user.pk: user for user in users}
    if dedupe_key:
        told = Notification.objects.filter(
            user_id__in=people, dedupe_key=dedupe_key, read=False
        ).values_list("user_id", flat=True)
        for user_id in told:
            people.pop(user_id, None)
    made = Notification.objects.bulk_create(
        Notification(
            user=user, level=level, title=title[:200], body=body, link=link, dedupe_key=dedupe_key
        )
        for user in people.values()
    )
    if not made and dedupe_key:
        return []  # everyone was told already: the channels were too
    message = {"level": level, "title": title[:200], "body": body, "link": link}
    deliveries = [Delivery(email=address, **message) for address in _emails(people.values(), level)]
    deliveries += [
        Delivery(channel=channel, **message)
        for channel in _channels(team, admins_channels)
        if at_least(level, channel.min_level)
    ]
    Delivery.objects.bulk_create(deliveries)
    transaction.on_commit(partial(_enqueue, [d.pk for d in deliveries]))
    return made


def notify_admins(
    *, level: str, title: str, body: str = "", link: str = "", dedupe_key: str = ""
) -> None:
    """Tell every platform admin, and send it to the admins' channels."""
    admins = get_user_model().objects.filter(is_staff=True, is_active=True)
    notify(
        admins,
        level=level,
        title=title,
        body=body,
        link=link,
        dedupe_key=dedupe_key,
        admins_channels=True,
    )


def _emails(users: Iterable[User], level: str) -> list[str]:
    with_address = [user for user in users if user.email]
    prefs = {
        p.user_id: p for p in EmailPreference.objects.filter(user__in=[u.pk for u in with_address])
    }
    return [
        user.email
        for user in with_address
        if ((pref := prefs.get(user.pk)) is None and at_least(level, DEFAULT_EMAIL_LEVEL))
        or (pref is not None and pref.enabled and at_least(level, pref.min_level))
    ]


def _channels(team: Team | None, admins: bool) -> list[Channel]:
    wanted = Q(team=team) if team is not None else Q(pk__in=[])
    if admins:
        wanted |= Q(team__isnull=True)
    return list(Channel.objects.filter(wanted, enabled=True))


def _enqueue(delivery_ids: list[int]) -> None:
    from notifications.tasks import deliver

    for delivery_id in delivery_ids:
        try:
            deliver.delay(delivery_id)
        except Exception:  # a broker away: the delivery stays pending, the change is committed
            log.exception("enqueueing delivery %s", delivery_id)


__all__ = ["ChannelKind", "Level", "notify", "notify_admins"]
