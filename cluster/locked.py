"""`LockedJobs`: job rows locked for the rest of the transaction, many in one query, and the
unit of work (`jobs.states.Moves`) their changes go through.
"""

from __future__ import annotations

from collections.abc import Iterable

from jobs.models import Job
from jobs.states import Moves

RELATED = ("team", "owner", "queue", "gpu_type")
"""What every locked job brings along: its status messages and audit events name them."""
CHUNK = 1000


class LockedJobs:
    """Job rows locked until the transaction ends, one object per job, and `moves`, which
    writes what changes in them before the transaction commits (`cluster.observe.writing`).

    `lock()` takes many rows in one query, in id order, so two lockers never deadlock: FOR NO
    KEY UPDATE OF the job table only. Locking the joined team, queue and user rows too would
    block (and could deadlock with) every submission to those teams, and a plain FOR UPDATE
    would also block every insert that refers to a locked job (log chunks, roll-ups): a foreign
    key check takes KEY SHARE. `get()` fetches one it has not seen. With `only` (as the ORM's
    `only()`: field names, `relation__field` for the team, owner, queue and GPU type), just
    those fields are read; anything else is loaded when first read.
    """

    def __init__(self, only: tuple[str, ...] = ()) -> None:
        self._rows: dict[int, Job | None] = {}
        self._only = only
        self.moves = Moves()

    def lock(self, job_ids: Iterable[int]) -> None:
        wanted = sorted(set(job_ids) - self._rows.keys())
        rows = Job.unscoped.select_for_update(no_key=True, of=("self",)).select_related(*RELATED)
        if self._only:
            rows = rows.only(*self._only)
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            found = {job.pk: job for job in rows.filter(pk__in=chunk).order_by("pk")}
            for job_id in chunk:
                self._rows[job_id] = found.get(job_id)

    def get(self, job_id: int) -> Job | None:
        if job_id not in self._rows:
            self.lock([job_id])
        return self._rows[job_id]
