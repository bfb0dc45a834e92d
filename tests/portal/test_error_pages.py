"""Error pages in the portal's style, with no traceback; a member opening an admin page is told
what is missing instead of being sent to the Django admin's login."""

from __future__ import annotations

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path

from portal.urls import handler400, handler403, handler404, handler500
from portal.urls import urlpatterns as portal_urlpatterns
from tests.conftest import World

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.portal.test_error_pages")]


def _broken(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("internal detail that must not reach the browser")


urlpatterns = [path("broken/", _broken), *portal_urlpatterns]
__all__ = ["handler400", "handler403", "handler404", "handler500"]


def _as(user: object) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)  # type: ignore[arg-type]
    return client


@pytest.mark.parametrize("url", ["/manage/teams/", "/manage/quotas/", "/manage/nodes/"])
def test_member_on_an_admin_page_is_told_what_is_missing(world: World, url: str) -> None:
    response = _as(world.bob).get(url)
    page = response.content.decode()
    assert response.status_code == 403
    assert "This page is for platform admins; your account is not one." in page
    assert 'class="topbar"' in page and "/admin/login/" not in page


def test_signed_out_visitor_is_sent_to_the_portals_sign_in(world: World) -> None:
    response = Client().get("/manage/teams/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_missing_page_is_a_styled_404(world: World) -> None:
    response = _as(world.bob).get("/jobs/999999/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "Not found" in page and "No such job." in page and 'class="topbar"' in page


def test_a_crash_is_a_styled_500_with_the_request_id_and_no_traceback(world: World) -> None:
    response = _as(world.bob).get("/broken/")
    page = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in page and response["X-Request-ID"] in page
    assert "Traceback" not in page and "internal detail" not in page


def test_error_pages_speak_chinese(world: World) -> None:
    client = _as(world.bob)
    client.post("/language/", {"language": "zh-hans", "next": "/"})
    page = client.get("/manage/teams/").content.decode()
    assert "平台管理员" in page
