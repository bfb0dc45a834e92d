"""Log replay for a job's websocket: what the browser missed, from the persisted chunks."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.db.models import Max

from base.delivery import Delivery
from base.streams import log_message
from cluster.models import JobLogChunk
from jobs.models import Job

TAIL_CHUNKS = 50  # a fresh page starts with this much; the download link has the rest
BATCH = 500


class LogReplay:
    """Replays a job's chunks after a point, and fills gaps the live stream leaves."""

    def __init__(self, job: Job, after: str | None) -> None:
        self.job = job
        self.after = int(after) if after is not None and after.isdigit() else None

    def _chunks(self) -> Any:
        return JobLogChunk.objects.for_team(self.job.team).filter(job=self.job)

    def _tail_start(self) -> int:
        ids = self._chunks().order_by("-id").values_list("id", flat=True)
        older = list(ids[TAIL_CHUNKS : TAIL_CHUNKS + 1])
        return older[0] if older else 0

    def _positions(self, after: int) -> dict[str, int]:
        """The last seq per pod the browser already holds (chunks up to `after`)."""
        rows = self._chunks().filter(id__lte=after).values("pod").annotate(last=Max("seq"))
        return {row["pod"]: row["last"] for row in rows}

    def _page(self, after: int) -> list[dict[str, Any]]:
        rows = self._chunks().filter(id__gt=after).order_by("id")[:BATCH]
        return [dict(log_message(chunk)) for chunk in rows]

    def _between(self, pod: str, after_seq: int, before_seq: int | None) -> list[dict[str, Any]]:
        rows = self._chunks().filter(pod=pod, seq__gt=after_seq)
        if before_seq is not None:
            rows = rows.filter(seq__lt=before_seq)
        return [dict(log_message(chunk)) for chunk in rows.order_by("seq")]

    async def fill_gap(self, pod: str, after_seq: int, before_seq: int | None) -> list[Any]:
        return await database_sync_to_async(self._between)(pod, after_seq, before_seq)

    async def run(self, delivery: Delivery) -> None:
        after = self.after
        if after is None:
            after = await database_sync_to_async(self._tail_start)()
        delivery.positions.update(await database_sync_to_async(self._positions)(after))
        while True:
            page = await database_sync_to_async(self._page)(after)
            for message in page:
                await delivery.send_log(message)
            if len(page) < BATCH:
                return
            after = page[-1]["chunk_id"]
