"""Celery tasks run in the test's process, as without a broker, even where REDIS_URL names one:
import `eager_celery` into a test module (it is autouse)."""

from __future__ import annotations

import pytest
from celery import current_app


@pytest.fixture(autouse=True)
def eager_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(current_app.conf, "CELERY_TASK_ALWAYS_EAGER", True)
