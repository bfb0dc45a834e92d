"""A job's state and why it waits reach each reader in their language: on its page, in the
lists, in the team's live API, and on the websockets, where each subscriber gets the words in
their own language while the codes stay as they are."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import transaction
from django.test import Client
from django.utils import translation

from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.reasons import reason_label
from jobs.spec import parse_spec
from jobs.states import transition
from portal.asgi import application
from scheduler import ReasonCode
from tenants.models import UserPreference
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db(transaction=True)

FIGURES = {"jobs_ahead": 7}
ENGLISH_REASON = "7 jobs ahead"
CHINESE_REASON = "前面有 7 个作业"


def _waiting(world: World) -> Job:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    Job.unscoped.filter(pk=job.pk).update(
        pending_code=ReasonCode.PRIORITY, pending_figures=FIGURES, pending_message=ENGLISH_REASON
    )
    return Job.unscoped.select_related("team", "owner", "queue", "gpu_type").get(pk=job.pk)


@pytest.mark.parametrize("code", list(ReasonCode))
def test_every_wait_reason_code_has_words_in_chinese(code: ReasonCode) -> None:
    with translation.override("zh-hans"):
        label = reason_label(code)
    assert label != code and not label.isascii()


@pytest.mark.parametrize("state", list(State))
def test_every_state_has_words_in_chinese(state: State) -> None:
    with translation.override("zh-hans"):
        assert not str(state.label).isascii()


def _browser(user: Any, language: str) -> Client:
    client = Client(headers={"Accept-Language": language})
    client.force_login(user)
    return client


def test_the_job_page_names_its_state_and_history_in_chinese(world: World) -> None:
    job = _waiting(world)
    with transaction.atomic():
        transition(job, State.ADMITTED, "admitted", placement={"h100-a-0": 1})
    page = _browser(world.bob, "zh-Hans").get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-state">已准入</span>' in page
    assert "<td>排队中</td><td>已准入</td>" in page  # the history, QUEUED → ADMITTED
    assert ">ADMITTED<" not in page and ">QUEUED<" not in page
    english = _browser(world.bob, "en").get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-state">Admitted</span>' in english and "<td>Queued</td>" in english


def test_a_waiting_jobs_page_names_its_reason_in_chinese(world: World) -> None:
    job = _waiting(world)
    page = _browser(world.bob, "zh-Hans").get(f"/jobs/{job.pk}/").content.decode()
    assert f'<strong title="PRIORITY">前面有作业</strong>: {CHINESE_REASON}' in page


def test_the_lists_name_states_in_chinese(world: World) -> None:
    job = _waiting(world)
    bob = _browser(world.bob, "zh-Hans")
    for url in ("/jobs/", "/"):
        page = bob.get(url).content.decode()
        assert '<span class="state queued">排队中</span>' in page, url
        assert ">QUEUED<" not in page, url
    assert (
        '<span class="state queued">Queued</span>'
        in _browser(world.bob, "en").get("/jobs/").content.decode()
    )
    with transaction.atomic():
        transition(job, State.CANCELLED, "cancelled")
    page = bob.get("/jobs/?state=CANCELLED").content.decode()
    assert '<span class="state cancelled">已取消</span>' in page


def test_the_team_live_api_gives_words_in_the_readers_language_beside_the_codes(
    world: World,
) -> None:
    _waiting(world)
    for language, label, reason in (
        ("zh-Hans", "排队中", CHINESE_REASON),
        ("en", "Queued", ENGLISH_REASON),
    ):
        row = _browser(world.alice, language).get("/api/v1/teams/vision/live/").json()["jobs"][0]
        assert (row["state"], row["pending_code"]) == ("QUEUED", "PRIORITY")
        assert (row["state_label"], row["pending_reason"]) == (label, reason), language
        assert row["pending_message"] == ENGLISH_REASON  # the scheduler's own, as stored


# ---- websockets ------------------------------------------------------------------------------


def _session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


async def _open(path: str, user: Any, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    cookie = await database_sync_to_async(_session_cookie)(user)
    cookies = [value for name, value in headers if name == b"cookie"]
    others = [(name, value) for name, value in headers if name != b"cookie"]
    communicator = WebsocketCommunicator(
        application,
        path,
        headers=[
            (b"origin", b"http://testserver"),
            (b"cookie", "; ".join([cookie, *(c.decode() for c in cookies)]).encode()),
            *others,
        ],
    )
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _status(communicator: WebsocketCommunicator) -> dict[str, Any]:
    while True:
        message = await communicator.receive_json_from(timeout=5)
        if message["type"] == "job.status":
            return message


CHINESE_BROWSER = (b"accept-language", b"zh-Hans,zh;q=0.9")
ENGLISH_BROWSER = (b"accept-language", b"en-GB,en;q=0.9")


async def test_the_job_stream_sends_the_reason_in_each_subscribers_language(
    world: World,
) -> None:
    job = await database_sync_to_async(_waiting)(world)
    chinese = await _open(f"/ws/jobs/{job.pk}/", world.bob, CHINESE_BROWSER)
    english = await _open(f"/ws/jobs/{job.pk}/", world.alice, ENGLISH_BROWSER)
    for communicator, label, reason, words in (
        (chinese, "排队中", CHINESE_REASON, "前面有作业"),
        (english, "Queued", ENGLISH_REASON, "Jobs ahead"),
    ):
        message = await _status(communicator)  # the state as the socket opened
        assert (message["state"], message["pending_code"]) == ("QUEUED", "PRIORITY")
        assert message["pending_figures"] == FIGURES
        assert (message["state_label"], message["pending_reason"]) == (label, reason)
        assert message["pending_label"] == words
    for communicator in (chinese, english):
        await communicator.disconnect()


def _requeue_with_a_reason(job: Job) -> None:
    """What the controller does in one flush: the job moves, the scheduler says why it waits."""
    with transaction.atomic():
        transition(job, State.ADMITTED, "admitted", placement={"h100-a-0": 1})
        transition(job, State.PREEMPTED, "reclaimed")
        transition(
            job,
            State.QUEUED,
            "requeued",
            pending_code=ReasonCode.NO_CAPACITY,
            pending_figures={"requested": 1, "gpu_type": "h100-80g", "free": 0},
            pending_message="1 h100-80g GPUs requested, 0 free",
        )


async def _until_queued(communicator: WebsocketCommunicator) -> list[dict[str, Any]]:
    """The status messages up to and including the one that says the job waits again."""
    seen = [await _status(communicator)]
    while seen[-1]["state"] != "QUEUED":
        seen.append(await _status(communicator))
    return seen


async def test_the_team_stream_sends_each_change_in_each_subscribers_language(
    world: World,
) -> None:
    job = await database_sync_to_async(_waiting)(world)
    chinese = await _open("/ws/teams/vision/", world.bob, CHINESE_BROWSER)
    english = await _open("/ws/teams/vision/", world.alice)  # no Accept-Language: the default
    await database_sync_to_async(_requeue_with_a_reason)(job)
    for communicator, label, reason in (
        (chinese, "排队中", "申请 1 块 h100-80g GPU，空闲 0 块"),
        (english, "Queued", "1 h100-80g GPUs requested, 0 free"),
    ):
        requeued = (await _until_queued(communicator))[-1]
        assert (requeued["state"], requeued["pending_code"]) == ("QUEUED", "NO_CAPACITY")
        assert (requeued["state_label"], requeued["pending_reason"]) == (label, reason)
    for communicator in (chinese, english):
        await communicator.disconnect()


def _prefer(user: Any, language: str) -> None:
    UserPreference.objects.update_or_create(user=user, defaults={"language": language})


async def test_a_subscribers_stored_language_and_cookie_choose_as_for_their_pages(
    world: World,
) -> None:
    job = await database_sync_to_async(_waiting)(world)
    await database_sync_to_async(_prefer)(world.bob, "zh-hans")
    # The stored choice outweighs the browser's language; the language cookie outweighs both.
    stored = await _open(f"/ws/jobs/{job.pk}/", world.bob, ENGLISH_BROWSER)
    cookie = (b"cookie", f"{settings.LANGUAGE_COOKIE_NAME}=en".encode())
    switched = await _open(f"/ws/jobs/{job.pk}/", world.bob, CHINESE_BROWSER, cookie)
    assert (await _status(stored))["pending_reason"] == CHINESE_REASON
    assert (await _status(switched))["pending_reason"] == ENGLISH_REASON
    for communicator in (stored, switched):
        await communicator.disconnect()
