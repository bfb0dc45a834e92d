"""The notification list and unread count: a user's own only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.template import Context, RequestContext, Template
from django.test import Client, RequestFactory

from notifications.models import Notification
from notifications.send import notify
from tests.conftest import World

pytestmark = pytest.mark.django_db


def _as(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_user_sees_and_reads_only_their_own(world: World) -> None:
    notify([world.bob], level="warning", title="for bob")
    notify([world.carol], level="warning", title="for carol")
    page = _as(world.bob).get("/notifications/").content.decode()
    assert "for bob" in page and "for carol" not in page
    theirs = Notification.objects.get(user=world.carol)
    _as(world.bob).post("/notifications/read/", {"id": [str(theirs.pk)]})
    assert not Notification.objects.get(pk=theirs.pk).read  # not bob's to mark
    _as(world.bob).post("/notifications/read/")
    assert Notification.objects.get(user=world.bob).read


def test_the_header_tag_counts_unread(world: World) -> None:
    notify([world.bob], level="info", title="one")
    notify([world.bob], level="info", title="two")
    request = RequestFactory().get("/")
    request.user = world.bob
    template = Template("{% load notification_tags %}{% unread_notifications as n %}{{ n }}")
    assert template.render(RequestContext(request)) == "2"
    assert template.render(Context({})) == "0"


def test_anonymous_users_are_sent_to_log_in(world: World) -> None:
    assert Client().get("/notifications/").status_code == 302
