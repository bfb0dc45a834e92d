"""Signed checkpoints of the chain's (seq, hash), kept where the database cannot rewrite them.

Whoever can write the database can delete the newest rows and rewind the head: what remains
is a chain that verifies. A checkpoint written outside the database (a line in the log stream
and in an append-only file) and signed with the audit key remembers how far the chain reached
and with which hash; `audit_verify` holds the chain against the latest one.

The controller, the only clock, writes one every reconcile interval when the chain has grown
(`periodic_checkpoint`); `manage.py audit_checkpoint` writes one by hand.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from django.conf import settings
from django.utils import timezone

from audit.chain import checkpoint_problems
from audit.models import AuditEvent

log = logging.getLogger(__name__)

# A checkpoint line is under 250 bytes: the file's last 4 KiB hold the latest whole.
TAIL_BYTES = 4096


class CheckpointError(RuntimeError):
    """The latest checkpoint cannot be read, or was not signed with the audit key."""


class ChainRewritten(RuntimeError):
    """The database no longer holds what the latest checkpoint anchored."""


def _signature(seq: int, hash: str, at: str) -> str:
    # Prefixed, so that a checkpoint's signature is never also a valid hash of the chain.
    message = f"audit-checkpoint:{seq}:{hash}:{at}".encode()
    return hmac.new(settings.AUDIT_KEY.encode(), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Checkpoint:
    """The chain reached `seq`, whose row's hash was `hash`, at time `at`."""

    seq: int
    hash: str
    at: datetime
    signature: str

    @classmethod
    def sign(cls, seq: int, hash: str) -> Checkpoint:
        at = timezone.now()
        return cls(seq, hash, at, _signature(seq, hash, at.isoformat()))

    def to_json(self) -> str:
        fields = {"seq": self.seq, "hash": self.hash, "at": self.at.isoformat()}
        return json.dumps({**fields, "signature": self.signature})

    @classmethod
    def from_json(cls, line: str) -> Checkpoint:
        """Parse a checkpoint and check its signature; CheckpointError names what is wrong."""
        try:
            fields = json.loads(line)
            seq, hash, at = int(fields["seq"]), str(fields["hash"]), str(fields["at"])
            checkpoint = cls(seq, hash, datetime.fromisoformat(at), str(fields["signature"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"unreadable ({exc})") from None
        if not hmac.compare_digest(checkpoint.signature, _signature(seq, hash, at)):
            raise CheckpointError("not signed with the audit key")
        return checkpoint


class CheckpointStore(Protocol):
    """Where checkpoints are kept out of the database's reach.

    An object store with write-once retention would be another implementation of these two.
    """

    def append(self, checkpoint: Checkpoint) -> None: ...

    def latest(self) -> Checkpoint | None: ...


class FileStore:
    """One checkpoint per line, only ever appended to (`AUDIT_CHECKPOINT_FILE`)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, checkpoint: Checkpoint) -> None:
        # One write on an O_APPEND descriptor: two writers' lines never interleave.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(fd, (checkpoint.to_json() + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def latest(self) -> Checkpoint | None:
        try:
            with self.path.open("rb") as file:
                file.seek(max(0, file.seek(0, os.SEEK_END) - TAIL_BYTES))
                lines = file.read().splitlines()
        except FileNotFoundError:
            return None
        if not lines:
            return None
        try:
            return Checkpoint.from_json(lines[-1].decode(errors="replace"))
        except CheckpointError as exc:
            raise CheckpointError(f"{self.path}: the latest checkpoint is {exc}") from None


def checkpoint_store() -> CheckpointStore:
    return FileStore(Path(settings.AUDIT_CHECKPOINT_FILE))


def _hash_at(seq: int) -> str | None:
    return AuditEvent.chain.filter(seq=seq).values_list("hash", flat=True).first()


def write_checkpoint(store: CheckpointStore | None = None) -> Checkpoint | None:
    """Anchor the chain's newest row outside the database; None when nothing was added since.

    One indexed query and a read of the file's last 4 KiB when nothing changed. Raises
    ChainRewritten, writing nothing, when the row the latest checkpoint anchored is gone or
    differs: a new checkpoint would bless the truncated chain.
    """
    store = store or checkpoint_store()
    latest = store.latest()
    last = AuditEvent.chain.order_by("-seq").values_list("seq", "hash").first()
    seq, hash = last or (0, "")
    if latest is not None:
        if (seq, hash) == (latest.seq, latest.hash):
            return None
        anchored_hash = hash if seq == latest.seq else _hash_at(latest.seq)
        if problems := checkpoint_problems(latest, seq, anchored_hash):
            raise ChainRewritten(problems[0])
    if last is None:
        return None
    checkpoint = Checkpoint.sign(seq, hash)
    store.append(checkpoint)
    log.info("audit checkpoint %s", checkpoint.to_json())
    return checkpoint


def periodic_checkpoint() -> None:
    """The controller's duty: write a checkpoint if due, logging what goes wrong.

    A chain found rewritten, or a checkpoint file that cannot be written, must not stop
    scheduling; it is logged as an error for the operators' alerting instead.
    """
    try:
        write_checkpoint()
    except (ChainRewritten, CheckpointError) as exc:
        log.error("audit chain not anchored: %s", exc)
    except OSError:
        log.exception("audit checkpoint could not be written")
