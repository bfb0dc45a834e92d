"""Delivery: one Celery task per email or webhook message, retried with backoff; a message that
still fails after its retries is marked failed (it never raises into the caller's process)."""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx
from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from notifications.models import Delivery, DeliveryState
from notifications.payloads import Message, refused, request

log = logging.getLogger(__name__)
MAX_RETRIES = 4
TIMEOUT_S = 5.0


class DeliveryError(Exception):
    """The service did not take the message."""


def _backoff(retries: int) -> int:
    return int(30 * 2**retries)  # 30 s, 1 min, 2 min, 4 min


@shared_task(bind=True, max_retries=MAX_RETRIES, name="notifications.tasks.deliver")
def deliver(self: Any, delivery_id: int) -> str:
    """Send one delivery; retry it on failure; mark it sent or, at last, failed."""
    delivery = Delivery.objects.select_related("channel").filter(pk=delivery_id).first()
    if delivery is None or delivery.state != DeliveryState.PENDING:
        return "gone"
    delivery.attempts += 1
    try:
        _send(delivery)
    except (DeliveryError, httpx.HTTPError, OSError) as exc:
        delivery.last_error = str(exc)[:500]
        if self.request.retries < MAX_RETRIES:
            delivery.save(update_fields=["attempts", "last_error"])
            if self.request.is_eager:  # no worker to come back later (the demo, tests): now
                return str(deliver.apply((delivery_id,), retries=self.request.retries + 1).get())
            raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from None
        delivery.state = DeliveryState.FAILED
        delivery.save(update_fields=["attempts", "last_error", "state"])
        log.warning("delivery %s failed after %s attempts: %s", delivery.pk, delivery.attempts, exc)
        return "failed"
    delivery.state, delivery.sent_at = DeliveryState.SENT, timezone.now()
    delivery.save(update_fields=["attempts", "last_error", "state", "sent_at"])
    return "sent"


def _send(delivery: Delivery) -> None:
    message = Message(delivery.level, delivery.title, delivery.body, delivery.link)
    channel = delivery.channel
    if channel is None or channel.kind == "email":
        to = [delivery.email] if channel is None else _addresses(channel.target)
        body = "\n\n".join(part for part in (message.body, message.link) if part)
        subject = f"[{message.level}] {message.title}"
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, to)
        return
    out = request(channel.kind, channel.target, channel.secret, message, time.time())
    response = post_json(out.url, out.json)
    if response.status_code >= 400:
        raise DeliveryError(f"HTTP {response.status_code}: {response.text[:200]}")
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if reason := refused(channel.kind, answer):
        raise DeliveryError(reason)


def _addresses(target: str) -> list[str]:
    return [a.strip() for a in target.split(",") if a.strip()]


def post_json(url: str, body: dict[str, Any]) -> httpx.Response:
    """POST `body` as JSON (the seam tests replace with a local receiver's URL, not this)."""
    with httpx.Client(timeout=TIMEOUT_S, follow_redirects=False) as client:
        return client.post(url, json=body)
