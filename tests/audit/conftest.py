"""Each test anchors its chain in a checkpoint file of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def checkpoint_file(settings: Any, tmp_path: Path) -> Path:
    # The default file under VAR_DIR outlives the test database: a checkpoint left there by
    # another test would anchor a chain this test never wrote.
    settings.AUDIT_CHECKPOINT_FILE = tmp_path / "audit-checkpoints.jsonl"
    return settings.AUDIT_CHECKPOINT_FILE
