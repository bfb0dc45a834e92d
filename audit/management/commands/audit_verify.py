"""`manage.py audit_verify`: prove the chain intact or name every broken link."""

from collections.abc import Generator
from typing import Any, cast

from django.core.management.base import BaseCommand, CommandError

from audit.chain import Verdict, verify
from audit.checkpoints import Checkpoint, CheckpointError, checkpoint_store
from audit.models import GENESIS_HASH, AuditEvent, AuditHead


class Command(BaseCommand):
    help = (
        "Verify the audit trail's hash chain against its head and the latest checkpoint; "
        "prints every broken link and exits non-zero if there is any."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.broken, self.first_broken = 0, ""
        head = AuditHead.objects.filter(pk=1).first()
        checkpoint = self._checkpoint()
        events = cast(Generator[AuditEvent], AuditEvent.chain.order_by("seq").iterator(2000))
        try:
            verdict = verify(
                events,
                (head.seq, head.hash) if head else (0, GENESIS_HASH),
                checkpoint,
                self._report,
            )
        finally:
            # On PostgreSQL this is a server-side cursor: close it now, inside the transaction
            # that opened it, not whenever the stopped generator is collected.
            events.close()
        if self.broken:
            raise CommandError(
                f"audit chain BROKEN: {self.broken} broken link{'s' if self.broken > 1 else ''} "
                f"in {verdict.checked} events; the first: {self.first_broken}"
            )
        self.stdout.write(
            f"audit chain OK: {verdict.checked} events; {_coverage(verdict, checkpoint)}"
        )

    def _checkpoint(self) -> Checkpoint | None:
        """The latest checkpoint; one that cannot be trusted is itself a broken link."""
        try:
            return checkpoint_store().latest()
        except CheckpointError as exc:
            self._report(str(exc))
            return None

    def _report(self, problem: str) -> None:
        self.broken += 1
        self.first_broken = self.first_broken or problem
        self.stdout.write(f"BROKEN {problem}")


def _coverage(verdict: Verdict, checkpoint: Checkpoint | None) -> str:
    if checkpoint is None:
        return f"no checkpoint yet: none of the {verdict.checked} events is anchored"
    since = verdict.checked - verdict.anchored
    return (
        f"{verdict.anchored} anchored by the checkpoint at seq={checkpoint.seq} of "
        f"{checkpoint.at.isoformat()}, {since} written since, not yet anchored"
    )
