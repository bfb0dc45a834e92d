"""`manage.py audit_checkpoint`: anchor the audit chain's newest row outside the database."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from audit.checkpoints import ChainRewritten, CheckpointError, checkpoint_store, write_checkpoint


class Command(BaseCommand):
    help = (
        "Write a signed checkpoint of the audit chain's (seq, hash) to AUDIT_CHECKPOINT_FILE and "
        "the log; nothing if the chain has not grown. The controller does this periodically."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        store = checkpoint_store()
        try:
            written = write_checkpoint(store)
        except (ChainRewritten, CheckpointError) as exc:
            raise CommandError(f"audit chain not anchored: {exc}") from None
        if written is not None:
            self.stdout.write(f"checkpoint written at seq={written.seq}")
            return
        latest = store.latest()
        if latest is None:
            self.stdout.write("no audit events yet: nothing to anchor")
        else:
            self.stdout.write(f"nothing new since the checkpoint at seq={latest.seq}")
