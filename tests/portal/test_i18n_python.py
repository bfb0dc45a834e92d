"""Simplified Chinese in the Python code: wait reasons, flash messages, form labels, API errors."""

from __future__ import annotations

import re
import string
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation

from jobs.actions import submit_job
from jobs.models import Job
from jobs.reasons import TEMPLATES, WORDS, pending_reason, reason_text
from jobs.spec import parse_spec
from scheduler import ReasonCode
from scheduler.decisions import _TEMPLATES as SCHEDULER_TEMPLATES
from scheduler.decisions import Reason
from scheduler.fits import LIMITS
from tests.conftest import World, api_as, spec

CHINESE = re.compile(r"[\u4e00-\u9fff]")
PERCENT_FIELD = re.compile(r"%\((\w+)\)s")


def _scheduler_figures(code: ReasonCode) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(SCHEDULER_TEMPLATES[code]) if name}


SAMPLE_WORDS = {"scope": "team", "limit_by": "team quota", "gpu_type": "h100-80g"}


def _sample_figures(code: ReasonCode) -> dict[str, Any]:
    """Figures like the scheduler's: numbers, names, and the words among them."""
    return {name: SAMPLE_WORDS.get(name, 3) for name in _scheduler_figures(code)}


@pytest.mark.parametrize("code", list(ReasonCode))
def test_every_reason_has_a_template_with_the_schedulers_figures(code: ReasonCode) -> None:
    assert code in TEMPLATES, f"jobs/reasons.py has no template for {code}"
    with translation.override("en"):
        ours = set(PERCENT_FIELD.findall(str(TEMPLATES[code])))
    assert ours == _scheduler_figures(code)


@pytest.mark.parametrize("code", list(ReasonCode))
def test_a_reason_reads_in_english_as_the_scheduler_wrote_it(code: ReasonCode) -> None:
    figures = _sample_figures(code)
    english = Reason(code, figures).message
    with translation.override("en"):
        assert reason_text(code, figures, english) == english


@pytest.mark.parametrize("code", list(ReasonCode))
def test_every_reason_reads_in_chinese(code: ReasonCode) -> None:
    figures = _sample_figures(code)
    with translation.override("zh-hans"):
        text = reason_text(code, figures, Reason(code, figures).message)
    assert CHINESE.search(text) and "team" not in text and "quota" not in text


def test_a_quota_reason_in_chinese_names_the_department_in_chinese() -> None:
    figures = {"scope": "department", "used": 48, "limit": 48, "gpu_type": "h100-80g"}
    with translation.override("zh-hans"):
        text = reason_text(ReasonCode.QUOTA_EXHAUSTED, figures, "english")
    assert text == "部门已使用 48 块，上限 48 块 h100-80g"


def test_every_setting_a_job_may_never_fit_has_its_words() -> None:
    assert set(WORDS["limit_by"]) == set(LIMITS)
    with translation.override("zh-hans"):
        assert all(CHINESE.search(str(word)) for word in WORDS["limit_by"].values())


def test_an_unknown_code_or_missing_figures_fall_back_to_the_stored_message() -> None:
    with translation.override("zh-hans"):
        assert reason_text("SOMETHING_NEW", {"x": 1}, "as stored") == "as stored"
        assert reason_text(ReasonCode.PRIORITY, {}, "3 jobs ahead") == "3 jobs ahead"


def _waiting_job(world: World) -> Job:
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    Job.unscoped.filter(pk=job.pk).update(
        pending_code=ReasonCode.PRIORITY,
        pending_figures={"jobs_ahead": 7},
        pending_message="7 jobs ahead",
    )
    return Job.unscoped.get(pk=job.pk)


def _as(user: Any, language: str) -> Client:
    client = Client(headers={"Accept-Language": language})
    client.force_login(user)
    return client


def test_the_pages_show_why_a_job_waits_in_the_readers_language(world: World) -> None:
    job = _waiting_job(world)
    with translation.override("en"):
        assert pending_reason(job) == "7 jobs ahead"
    bob = _as(world.bob, "zh-Hans")
    for url in ("/", "/jobs/", f"/jobs/{job.pk}/"):
        page = bob.get(url).content.decode()
        assert "前面有 7 个作业" in page and "7 jobs ahead" not in page, url
    english = _as(world.bob, "en").get(f"/jobs/{job.pk}/").content.decode()
    assert "7 jobs ahead" in english


def test_flash_messages_follow_the_language(world: World) -> None:
    job = _waiting_job(world)
    bob = _as(world.bob, "zh-Hans")
    cancel = reverse("job-cancel", args=[job.pk])
    page = bob.post(cancel, follow=True).content.decode()
    assert f"作业 {job.name} 已取消。" in page
    again = bob.post(cancel, follow=True).content.decode()
    assert f"作业 {job.pk} 已经结束（CANCELLED）" in again


def test_the_submit_form_labels_its_fields_in_words(world: World) -> None:
    english = _as(world.bob, "en").get("/jobs/new/").content.decode()
    assert "GPUs per node" in english and "Gpus per node" not in english
    chinese = _as(world.bob, "zh-Hans").get("/jobs/new/").content.decode()
    assert all(word in chinese for word in ("每节点 GPU 数", "环境变量", "每行一个 NAME=value"))


def test_the_api_explains_a_bad_spec_in_the_requested_language(world: World) -> None:
    client = api_as(world.bob)
    bad = spec(gpus_per_node="four", memory="lots")
    response = client.post("/api/v1/jobs/", bad, format="json", HTTP_ACCEPT_LANGUAGE="zh-Hans")
    assert response.status_code == 400
    body = response.json()
    assert body["gpus_per_node"] == ["须为整数"]
    assert body["memory"] == ["须为 Kubernetes 数量格式，例如 64Gi"]
    english = client.post("/api/v1/jobs/", bad, format="json").json()
    assert english["gpus_per_node"] == ["must be an integer"]
