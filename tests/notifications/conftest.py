from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.notifications.receiver import Receiver, receiving


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as running:
        yield running


from tests.notifications.eager import eager_celery  # noqa: E402, F401 (autouse)
