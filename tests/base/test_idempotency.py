"""Idempotency-Key: a retried submission makes one job and gets the first answer again."""

from __future__ import annotations

import re
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models.signals import post_save
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from base.idempotency import MAX_KEY_CHARS
from base.models import IdempotencyKey
from jobs.models import Job
from tenants.tokens import issue_token
from tests.conftest import World, spec
from tests.portal.test_pages import FORM

pytestmark = pytest.mark.django_db


def _token_client(user: User) -> APIClient:
    """A client signed in as the CLI is, with an API token (authenticated by the view)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_token(user, 'cli')[1]}")
    return client


def _submit(client: APIClient | Client, key: str, body: dict[str, Any]) -> Any:
    return client.post(
        "/api/v1/jobs/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
    )


def _jobs(world: World) -> list[Job]:
    return list(Job.objects.for_user(world.admin).order_by("pk"))


def test_it_answers_a_retry_as_the_first_time_and_makes_one_job(world: World) -> None:
    client = _token_client(world.bob)
    first = _submit(client, "retry-1", spec())
    again = _submit(client, "retry-1", spec())
    assert first.status_code == again.status_code == 201
    assert again.content == first.content and again["Content-Type"] == first["Content-Type"]
    assert again["Idempotent-Replayed"] == "true"
    assert [job.pk for job in _jobs(world)] == [first.json()["id"]]


def test_the_same_key_with_another_body_is_a_conflict(world: World) -> None:
    client = _token_client(world.bob)
    first = _submit(client, "retry-1", spec())
    other = _submit(client, "retry-1", spec(name="other-name"))
    assert other.status_code == 409
    assert "Idempotency-Key retry-1 was used for another request" in other.json()["detail"]
    assert [job.pk for job in _jobs(world)] == [first.json()["id"]]


def test_another_user_with_the_same_key_is_independent(world: World) -> None:
    bobs = _submit(_token_client(world.bob), "shared-key", spec())
    alices = _submit(_token_client(world.alice), "shared-key", spec())
    assert bobs.status_code == alices.status_code == 201
    assert (bobs.json()["owner"], alices.json()["owner"]) == ("bob", "alice")
    assert len(_jobs(world)) == 2


def test_outsider_never_gets_another_users_answer_for_the_same_key(world: World) -> None:
    bobs = _submit(_token_client(world.bob), "shared-key", spec())
    carols = _submit(_token_client(world.carol), "shared-key", spec())
    assert bobs.status_code == 201
    assert carols.status_code == 404 and "Idempotent-Replayed" not in carols
    assert str(bobs.json()["id"]) not in carols.content.decode()
    assert len(_jobs(world)) == 1


def test_a_key_over_the_limit_is_refused_naming_the_header(world: World) -> None:
    response = _submit(_token_client(world.bob), "k" * (MAX_KEY_CHARS + 1), spec())
    assert response.status_code == 400
    assert response.json() == {
        "Idempotency-Key": ["must be 1 to 255 printable ASCII characters, got 256"]
    }
    assert _jobs(world) == []


def test_a_refused_submission_keeps_no_key_so_its_corrected_retry_runs(world: World) -> None:
    client = _token_client(world.bob)
    refused = _submit(client, "retry-1", spec(gpu_type="no-such-gpu"))
    assert refused.status_code == 400
    assert not IdempotencyKey.objects.exists()
    assert _submit(client, "retry-1", spec()).status_code == 201
    assert len(_jobs(world)) == 1


def test_keys_are_kept_for_24_hours_and_an_expired_one_is_free_again(world: World) -> None:
    client = _token_client(world.bob)
    before = timezone.now()
    _submit(client, "retry-1", spec())
    kept = IdempotencyKey.objects.get()
    assert before + timedelta(hours=24) <= kept.expires_at <= timezone.now() + timedelta(hours=24)
    IdempotencyKey.objects.update(expires_at=before)
    again = _submit(client, "retry-1", spec())
    assert again.status_code == 201 and "Idempotent-Replayed" not in again
    assert len(_jobs(world)) == 2
    assert IdempotencyKey.objects.get().expires_at > kept.expires_at  # the expired row is gone


def test_a_session_client_is_keyed_too(world: World) -> None:
    client = Client()
    client.force_login(world.bob)
    first = _submit(client, "retry-1", spec())
    assert _submit(client, "retry-1", spec()).content == first.content
    assert len(_jobs(world)) == 1


def _form_key(client: Client) -> str:
    page = client.get("/jobs/new/").content.decode()
    found = re.search(r'name="idempotency_key" value="([0-9a-f]{32})"', page)
    assert found is not None, "the submit form carries no idempotency key"
    return found.group(1)


def test_the_form_resubmitted_makes_one_job_and_lands_on_it(world: World) -> None:
    client = Client()
    client.force_login(world.bob)
    key = _form_key(client)
    assert _form_key(client) != key  # each rendering its own
    first = client.post("/jobs/new/", {**FORM, "idempotency_key": key})
    again = client.post("/jobs/new/", {**FORM, "idempotency_key": key})
    (job,) = _jobs(world)
    assert first.status_code == again.status_code == 302
    assert first["Location"] == again["Location"] == f"/jobs/{job.pk}/"


def test_the_form_resubmitted_with_other_values_is_refused(world: World) -> None:
    client = Client()
    client.force_login(world.bob)
    key = _form_key(client)
    client.post("/jobs/new/", {**FORM, "idempotency_key": key})
    other = client.post("/jobs/new/", {**FORM, "name": "other", "idempotency_key": key})
    assert other.status_code == 409
    assert "already submitted with other values" in other.content.decode()
    assert len(_jobs(world)) == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_write_once(world: World) -> None:
    """The second request arrives while the first holds its key uncommitted: it waits for the
    first's commit and replays its answer (whichever way the two interleave, one job)."""
    first_reserved, second_sent = threading.Event(), threading.Event()
    raw_token = issue_token(world.bob, "cli")[1]
    answers: list[Any] = []

    def hold_the_first(instance: IdempotencyKey, created: bool, **kwargs: Any) -> None:
        if created and not first_reserved.is_set():
            first_reserved.set()
            second_sent.wait(timeout=30)

    def submit(announce: threading.Event | None = None) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
        if announce is not None:
            announce.set()
        try:
            answers.append(_submit(client, "retry-1", spec()))
        finally:
            connection.close()

    post_save.connect(hold_the_first, sender=IdempotencyKey)
    try:
        first = threading.Thread(target=submit)
        first.start()
        assert first_reserved.wait(timeout=30)
        second = threading.Thread(target=submit, args=(second_sent,))
        second.start()
        first.join()
        second.join()
    finally:
        post_save.disconnect(hold_the_first, sender=IdempotencyKey)
    assert [answer.status_code for answer in answers] == [201, 201]
    assert answers[0].content == answers[1].content
    assert sorted("Idempotent-Replayed" in answer for answer in answers) == [False, True]
    assert len(_jobs(world)) == 1


def test_the_schema_documents_the_header_on_signed_in_posts(world: World) -> None:
    client = Client()
    client.force_login(world.bob)
    schema = client.get("/api/schema/", {"format": "json"}).json()
    submit = schema["paths"]["/api/v1/jobs/"]["post"]
    assert "Idempotency-Key" in [p["name"] for p in submit["parameters"] if p["in"] == "header"]
    assert {"400", "401", "403", "404", "409", "413", "429"} <= set(submit["responses"])
    token = schema["paths"]["/api/v1/auth/token/"]["post"]  # anonymous: no user to key by
    assert "Idempotency-Key" not in [p["name"] for p in token.get("parameters", [])]
