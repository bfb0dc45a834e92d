"""Checkpoints anchor the chain outside the database: a truncated or rewritten tail is found."""

from __future__ import annotations

import json
import logging
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from audit.checkpoints import (
    ChainRewritten,
    Checkpoint,
    FileStore,
    periodic_checkpoint,
    write_checkpoint,
)
from audit.models import GENESIS_HASH, AuditEvent
from jobs.actions import submit_job
from jobs.spec import parse_spec
from tests.audit.test_chain import _verify, _verify_broken
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db


def _submit(world: World, *names: str) -> None:
    for name in names:
        submit_job(world.vision, parse_spec(spec(name=name)), acting_user=world.bob)


def _truncate_to(seq: int) -> None:
    """What someone who can write the database does: drop the newest rows, rewind the head."""
    last = AuditEvent.chain.filter(seq=seq).values_list("hash", flat=True).first()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE seq > %s", [seq])
        cursor.execute(
            "UPDATE audit_audithead SET seq = %s, hash = %s", [seq, last or GENESIS_HASH]
        )


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_it_finds_a_truncated_tail_against_the_checkpoint(world: World) -> None:
    _submit(world, "one", "two", "three")
    assert write_checkpoint() is not None
    _truncate_to(1)
    out, summary = _verify_broken()
    assert "checkpoint anchors seq=3 but the chain ends at seq=1: rows were removed" in out
    assert "1 broken link" in summary


def test_it_finds_every_row_deleted(world: World) -> None:
    _submit(world, "one", "two")
    write_checkpoint()
    _truncate_to(0)
    out, _ = _verify_broken()
    assert "checkpoint anchors seq=2 but the chain ends at seq=0" in out


def test_it_finds_a_tail_rewritten_after_a_truncation(world: World) -> None:
    # The application goes on chaining from the rewound head: the new rows are validly keyed,
    # but the row the checkpoint anchored now holds another event.
    _submit(world, "one", "two", "three")
    write_checkpoint()
    _truncate_to(1)
    _submit(world, "four", "five", "six")
    out, _ = _verify_broken()
    assert "seq=3: differs from the checkpoint" in out
    with pytest.raises(ChainRewritten, match="seq=3"):
        write_checkpoint()


def test_writing_again_without_new_events_writes_nothing(
    world: World, checkpoint_file: Path
) -> None:
    _submit(world, "one")
    first = write_checkpoint()
    assert write_checkpoint() is None
    _submit(world, "two")
    second = write_checkpoint()
    assert first is not None and second is not None
    assert [(line["seq"], line["hash"]) for line in _lines(checkpoint_file)] == [
        (first.seq, first.hash),
        (second.seq, second.hash),
    ]
    assert second.hash == AuditEvent.chain.get(seq=2).hash


def test_nothing_is_anchored_before_the_first_event(checkpoint_file: Path) -> None:
    assert write_checkpoint() is None
    assert not checkpoint_file.exists()


def test_verify_says_how_much_of_the_chain_is_anchored(world: World) -> None:
    _submit(world, "one")
    assert "none of the 1 events is anchored" in _verify()
    _submit(world, "two", "three")
    write_checkpoint()
    _submit(world, "four")
    out = _verify()
    assert "audit chain OK: 4 events" in out
    assert "3 anchored by the checkpoint at seq=3" in out
    assert "1 written since, not yet anchored" in out


def test_a_checkpoint_not_signed_with_the_audit_key_is_reported(
    world: World, checkpoint_file: Path
) -> None:
    _submit(world, "one", "two")
    with override_settings(AUDIT_KEY="someone-elses-key"):
        write_checkpoint()
    out, _ = _verify_broken()
    assert "not signed with the audit key" in out
    assert str(checkpoint_file) in out


def test_a_forged_checkpoint_seq_is_reported(world: World, checkpoint_file: Path) -> None:
    _submit(world, "one", "two")
    write_checkpoint()
    line = _lines(checkpoint_file)[-1]
    checkpoint_file.write_text(json.dumps({**line, "seq": 1}) + "\n")
    out, _ = _verify_broken()
    assert "not signed with the audit key" in out


def test_the_checkpoint_goes_to_the_log_stream_too(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    _submit(world, "one")
    with caplog.at_level(logging.INFO, logger="audit.checkpoints"):
        written = write_checkpoint()
    assert written is not None
    logged = [r for r in caplog.records if r.name == "audit.checkpoints"]
    assert len(logged) == 1
    assert Checkpoint.from_json(logged[0].getMessage().split(" ", 2)[2]) == written


def test_the_latest_of_many_checkpoints_is_read(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "checkpoints.jsonl")
    assert store.latest() is None
    written = [Checkpoint.sign(seq, f"{seq:064x}") for seq in range(1, 200)]
    for checkpoint in written:
        store.append(checkpoint)
    assert store.latest() == written[-1]


def test_the_command_writes_a_checkpoint(world: World, checkpoint_file: Path) -> None:
    _submit(world, "one")
    out = StringIO()
    call_command("audit_checkpoint", stdout=out)
    assert "checkpoint written at seq=1" in out.getvalue()
    call_command("audit_checkpoint", stdout=out)
    assert "nothing new since the checkpoint at seq=1" in out.getvalue()
    assert len(_lines(checkpoint_file)) == 1


def test_the_command_fails_on_a_rewritten_chain(world: World) -> None:
    _submit(world, "one", "two")
    write_checkpoint()
    _truncate_to(1)
    with pytest.raises(CommandError, match="rows were removed"):
        call_command("audit_checkpoint", stdout=StringIO())


def test_the_controllers_duty_logs_a_rewrite_and_does_not_raise(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    _submit(world, "one", "two")
    periodic_checkpoint()
    _truncate_to(1)
    with caplog.at_level(logging.ERROR, logger="audit.checkpoints"):
        periodic_checkpoint()
    assert any("rows were removed" in r.getMessage() for r in caplog.records)
