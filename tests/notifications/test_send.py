"""notify(): in the portal, by email, and to each webhook kind, each channel on its own."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import mail
from django.db import transaction

from notifications.models import Channel, Delivery, DeliveryState, EmailPreference, Notification
from notifications.send import notify, notify_admins
from tests.conftest import World
from tests.notifications.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


def _channel(world: World, receiver: Receiver, kind: str, **extra: Any) -> Channel:
    return Channel.objects.create(
        team=world.vision, name=kind, kind=kind, target=f"{receiver.url}/{kind}", **extra
    )


def test_it_tells_users_in_the_portal_and_by_email_from_their_level(world: World) -> None:
    EmailPreference.objects.create(user=world.bob, min_level="critical")
    with transaction.atomic():
        notify([world.alice, world.bob], level="warning", title="GPU hot", link="/alerts/")
    assert sorted(Notification.objects.values_list("user__username", "level", "read")) == [
        ("alice", "warning", False),
        ("bob", "warning", False),
    ]
    assert [m.to for m in mail.outbox] == [["alice@example.org"]]  # bob: critical only
    assert "GPU hot" in mail.outbox[0].subject and "/alerts/" in mail.outbox[0].body


def test_nothing_is_sent_when_the_callers_transaction_rolls_back(world: World) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        notify([world.alice], level="critical", title="never")
        raise RuntimeError
    assert not Notification.objects.exists() and mail.outbox == []


def test_a_dedupe_key_tells_nobody_twice_while_unread(world: World, receiver: Receiver) -> None:
    _channel(world, receiver, "generic")
    for _ in range(2):
        notify([world.alice], level="warning", title="hot", dedupe_key="alert:1", team=world.vision)
    assert Notification.objects.filter(user=world.alice).count() == 1
    assert len(receiver.received) == 1
    Notification.objects.update(read=True)
    notify([world.alice], level="warning", title="hot", dedupe_key="alert:1", team=world.vision)
    assert Notification.objects.filter(user=world.alice).count() == 2


def test_each_webhook_kind_gets_its_services_payload(world: World, receiver: Receiver) -> None:
    for kind in ("generic", "slack", "feishu", "dingtalk"):
        _channel(world, receiver, kind)
    receiver.answers = {"/feishu": {"code": 0}, "/dingtalk": {"errcode": 0}}
    notify(
        [],
        level="critical",
        title="Xid 79",
        body="gpu 3 fell off the bus",
        link="/x/",
        team=world.vision,
    )
    got = {path: body for path, body in receiver.received}
    assert got["/generic"] == {
        "level": "critical",
        "title": "Xid 79",
        "body": "gpu 3 fell off the bus",
        "link": "/x/",
    }
    assert got["/slack"]["text"].startswith("[CRITICAL] Xid 79")
    assert got["/slack"]["blocks"][0]["text"]["type"] == "mrkdwn"
    assert got["/feishu"]["msg_type"] == "text" and "Xid 79" in got["/feishu"]["content"]["text"]
    assert got["/dingtalk"]["msgtype"] == "markdown"
    assert got["/dingtalk"]["markdown"]["title"] == "Xid 79"
    assert set(Delivery.objects.values_list("state", flat=True)) == {DeliveryState.SENT}


def test_signed_feishu_and_dingtalk_requests_carry_their_signatures(
    world: World, receiver: Receiver
) -> None:
    _channel(world, receiver, "feishu", secret="fs-secret")
    _channel(world, receiver, "dingtalk", secret="dt-secret")
    notify([], level="critical", title="signed", team=world.vision)
    got = dict(receiver.received)
    feishu = got["/feishu"]
    key = f"{feishu['timestamp']}\nfs-secret".encode()
    assert feishu["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
    (dingtalk_path,) = [p for p in got if p.startswith("/dingtalk")]
    query = parse_qs(urlsplit(dingtalk_path).query)
    message = f"{query['timestamp'][0]}\ndt-secret".encode()
    expected = hmac.new(b"dt-secret", message, hashlib.sha256).digest()
    assert query["sign"][0] == base64.b64encode(expected).decode()


def test_a_failing_channel_is_retried_and_never_blocks_the_others(
    world: World, receiver: Receiver
) -> None:
    _channel(world, receiver, "slack")
    _channel(world, receiver, "generic")
    Channel.objects.create(
        team=world.vision, name="down", kind="generic", target="http://127.0.0.1:9/"
    )
    receiver.failures_left = {"/slack": 2}  # two 503s, then it takes the message
    notify([world.alice], level="critical", title="retry me", team=world.vision)
    states = dict(
        Delivery.objects.filter(channel__isnull=False).values_list("channel__name", "state")
    )
    assert states == {"slack": "sent", "generic": "sent", "down": "failed"}
    slack = Delivery.objects.get(channel__name="slack")
    assert slack.attempts == 3 and receiver.paths().count("/slack") == 3
    down = Delivery.objects.get(channel__name="down")
    assert down.attempts == 5 and down.last_error
    assert Notification.objects.filter(user=world.alice).count() == 1
    assert [m.to for m in mail.outbox] == [["alice@example.org"]]


def test_a_refusal_in_a_200_answer_counts_as_a_failure(world: World, receiver: Receiver) -> None:
    _channel(world, receiver, "dingtalk")
    receiver.answers = {"/dingtalk": {"errcode": 310000, "errmsg": "sign not match"}}
    notify([], level="critical", title="refused", team=world.vision)
    delivery = Delivery.objects.get()
    assert delivery.state == "failed" and "310000" in delivery.last_error


def test_channels_route_by_level_and_team(world: World, receiver: Receiver) -> None:
    Channel.objects.create(
        team=world.vision,
        name="v",
        kind="generic",
        target=f"{receiver.url}/v",
        min_level="critical",
    )
    Channel.objects.create(
        team=world.nlp, name="n", kind="generic", target=f"{receiver.url}/n", min_level="info"
    )
    Channel.objects.create(
        team=None, name="ops", kind="generic", target=f"{receiver.url}/ops", min_level="warning"
    )
    notify([], level="warning", title="w", team=world.vision)
    assert receiver.paths() == []  # vision's channel wants critical; nlp's is another team's
    notify_admins(level="warning", title="for ops")
    assert receiver.paths() == ["/ops"]
    assert list(Notification.objects.values_list("user__username", flat=True)) == ["admin"]
