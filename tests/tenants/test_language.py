"""Each person's language follows them: stored when they choose it, used in every later session.

The language switch's URL and the middleware are wired here as the portal wires them (the
switch posts to `language-set`; UserLanguageMiddleware runs after authentication).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tenants.language import SESSION_KEY
from tenants.models import UserPreference
from tests.conftest import World


def _signed_in(user: Any, accept: str = "en-US,en;q=0.9") -> Client:
    client = Client(headers={"Accept-Language": accept})
    client.force_login(user)
    return client


def _jobs_heading(client: Client) -> str:
    page = client.get("/jobs/").content.decode()
    return "作业" if "<h1>作业</h1>" in page else "Jobs" if "<h1>Jobs</h1>" in page else page


def test_a_chosen_language_follows_the_user_into_a_fresh_session(world: World) -> None:
    laptop = _signed_in(world.bob)
    response = laptop.post("/language/", {"language": "zh-hans", "next": "/jobs/"})
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    assert UserPreference.objects.get(user=world.bob).language == "zh-hans"
    assert _jobs_heading(laptop) == "作业"
    phone = _signed_in(world.bob)  # another browser: no cookie, an English Accept-Language
    assert django_settings.LANGUAGE_COOKIE_NAME not in phone.cookies
    assert _jobs_heading(phone) == "作业"
    assert _jobs_heading(_signed_in(world.alice)) == "Jobs"  # nobody else's pages change


def test_pages_take_the_language_from_the_session_not_the_database(world: World) -> None:
    UserPreference.objects.create(user=world.bob, language="zh-hans")
    bob = _signed_in(world.bob)  # the language is read once, at login
    with CaptureQueriesContext(connection) as queries:
        assert _jobs_heading(bob) == "作业"
    assert not [q["sql"] for q in queries if "userpreference" in q["sql"].lower()]


def test_a_session_opened_before_the_login_receiver_reads_the_choice_once(world: World) -> None:
    UserPreference.objects.create(user=world.bob, language="zh-hans")
    bob = _signed_in(world.bob)
    session = bob.session
    del session[SESSION_KEY]
    session.save()
    assert _jobs_heading(bob) == "作业"
    assert bob.session[SESSION_KEY] == "zh-hans"


def test_choosing_english_again_is_remembered_too(world: World) -> None:
    UserPreference.objects.create(user=world.bob, language="zh-hans")
    bob = _signed_in(world.bob)
    assert _jobs_heading(bob) == "作业"
    bob.post("/language/", {"language": "en", "next": "/"})
    assert _jobs_heading(bob) == "Jobs"
    assert _jobs_heading(_signed_in(world.bob, "zh-Hans")) == "Jobs"


def test_this_browsers_cookie_wins_over_the_stored_choice(world: World) -> None:
    UserPreference.objects.create(user=world.bob, language="zh-hans")
    bob = _signed_in(world.bob)
    bob.cookies[django_settings.LANGUAGE_COOKIE_NAME] = "en"
    assert _jobs_heading(bob) == "Jobs"


def test_without_a_stored_choice_the_browser_language_decides(world: World) -> None:
    assert _jobs_heading(_signed_in(world.bob, "zh-Hans")) == "作业"
    assert _jobs_heading(_signed_in(world.bob)) == "Jobs"


def test_anonymous_users_still_follow_accept_language(world: World) -> None:
    UserPreference.objects.create(user=world.bob, language="zh-hans")
    english = Client(headers={"Accept-Language": "en"}).get("/accounts/login/").content.decode()
    chinese = Client(headers={"Accept-Language": "zh-Hans"}).get("/accounts/login/")
    assert "<h1>登录</h1>" not in english and "<h1>登录</h1>" in chinese.content.decode()


def test_an_anonymous_switch_sets_the_cookie_and_stores_nothing(world: World) -> None:
    visitor = Client()
    response = visitor.post("/language/", {"language": "zh-hans", "next": "/accounts/login/"})
    assert response.status_code == 302
    assert visitor.cookies[django_settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    assert "<h1>登录</h1>" in visitor.get("/accounts/login/").content.decode()
    assert not UserPreference.objects.exists()


def test_a_language_not_offered_is_not_stored(world: World) -> None:
    bob = _signed_in(world.bob)
    response = bob.post("/language/", {"language": "xx-klingon", "next": "/"})
    assert response.status_code == 302
    assert not UserPreference.objects.filter(user=world.bob).exists()
    assert _jobs_heading(bob) == "Jobs"


def test_the_switch_refuses_get(world: World) -> None:
    assert _signed_in(world.bob).get("/language/?language=zh-hans").status_code == 405
    assert not UserPreference.objects.exists()
