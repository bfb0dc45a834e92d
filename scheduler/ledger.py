"""Who holds how many GPUs, and whether one more job stays within quota, cap and borrowing rules.

Quota semantics (design section 4): `guaranteed` GPUs are the team's own; up to `limit` it may
borrow GPUs that their owners leave idle, first inside its department (the department as a whole
stays within the sum of its guarantees), then, if the configuration allows, anywhere. Physical
availability is the placement's business; borrowed GPUs are given back by reclaim preemption.

Jobs already told to stop (in their grace period) still count against limits, since they hold
their GPUs until they stop, but no longer count as borrowing: their GPUs are on the way back.
"""

from __future__ import annotations

from scheduler.config import PolicyConfig
from scheduler.decisions import Figure, Reason, ReasonCode
from scheduler.model import JobRequest, Snapshot

TeamType = tuple[str, str]


class Ledger:
    def __init__(self, snapshot: Snapshot, config: PolicyConfig, capacity: dict[str, int]) -> None:
        self._config = config
        self._quota = {(q.team, q.gpu_type): (q.guaranteed, q.limit) for q in snapshot.quotas}
        self._caps = {(c.team, c.member): c.max_gpus for c in snapshot.member_caps}
        self._department = {t.name: t.department or f"team:{t.name}" for t in snapshot.teams}
        owned: dict[str, int] = {}
        for q in snapshot.quotas:
            owned[q.team] = owned.get(q.team, 0) + q.guaranteed
        scale = owned if config.weight_by_guarantee else {}
        self._weight = {
            t.name: max(t.weight, 1e-9) * max(scale.get(t.name, 1), 1) for t in snapshot.teams
        }
        self._capacity = capacity
        self._dept_guaranteed: dict[TeamType, int] = {}
        for (team, gpu_type), (guaranteed, _) in sorted(self._quota.items()):
            key = (self.department(team), gpu_type)
            self._dept_guaranteed[key] = self._dept_guaranteed.get(key, 0) + guaranteed
        self.used: dict[TeamType, int] = {}
        self._dept_used: dict[TeamType, int] = {}
        self._member_used: dict[TeamType, int] = {}
        self._past = _past_shares(snapshot, config, capacity)
        self._shares: dict[str, float] = {}
        self._versions: dict[str, int] = {}
        self._leaving: dict[TeamType, int] = {}
        for running in snapshot.running:
            self.add(running.job)
            if running.grace_until is not None:
                self.leave(running.job)

    def department(self, team: str) -> str:
        return self._department.get(team) or f"team:{team}"

    def guaranteed(self, team: str, gpu_type: str) -> int:
        return self._quota.get((team, gpu_type), (0, 0))[0]

    def limit(self, team: str, gpu_type: str) -> int:
        return self._quota.get((team, gpu_type), (0, 0))[1]

    def cap(self, team: str, member: str) -> int | None:
        return self._caps.get((team, member))

    def department_guaranteed(self, team: str, gpu_type: str) -> int:
        return self._dept_guaranteed.get((self.department(team), gpu_type), 0)

    def add(self, job: JobRequest) -> None:
        self._count(job, job.gpus)

    def remove(self, job: JobRequest) -> None:
        self._count(job, -job.gpus)

    def version(self, team: str) -> int:
        """Changes whenever the team's holdings do (so cached orderings can be trusted)."""
        return self._versions.get(team, 0)

    def _count(self, job: JobRequest, gpus: int) -> None:
        self._shares.pop(job.team, None)
        self._versions[job.team] = self._versions.get(job.team, 0) + 1
        key = (job.team, job.gpu_type)
        self.used[key] = self.used.get(key, 0) + gpus
        dept = (self.department(job.team), job.gpu_type)
        self._dept_used[dept] = self._dept_used.get(dept, 0) + gpus
        member = (job.team, job.member)
        self._member_used[member] = self._member_used.get(member, 0) + gpus

    def leave(self, job: JobRequest) -> None:
        """The job was told to stop: it still holds its GPUs, but is no longer borrowing."""
        key = (job.team, job.gpu_type)
        self._leaving[key] = self._leaving.get(key, 0) + job.gpus

    def holding(self, team: str, gpu_type: str) -> int:
        """GPUs of the type the team holds and keeps (not counting jobs told to stop)."""
        key = (team, gpu_type)
        return self.used.get(key, 0) - self._leaving.get(key, 0)

    def within_guarantee(self, job: JobRequest) -> bool:
        used = self.used.get((job.team, job.gpu_type), 0)
        return used + job.gpus <= self.guaranteed(job.team, job.gpu_type)

    def borrowing(self, team: str, gpu_type: str) -> int:
        """GPUs of the type the team holds beyond its guarantee."""
        return max(0, self.holding(team, gpu_type) - self.guaranteed(team, gpu_type))

    def check(self, job: JobRequest) -> Reason | None:
        """Why the job may not start on quota grounds, or None if it may."""
        used = self.used.get((job.team, job.gpu_type), 0)
        limit = self.limit(job.team, job.gpu_type)
        if used + job.gpus > limit:
            return _quota_reason("team", job, used, limit)
        cap = self._caps.get((job.team, job.member))
        member_used = self._member_used.get((job.team, job.member), 0)
        if cap is not None and member_used + job.gpus > cap:
            figures: dict[str, Figure] = {"member": job.member, "team": job.team}
            figures.update(used=member_used, cap=cap)
            return Reason(ReasonCode.MEMBER_CAP, {**figures, "requested": job.gpus})
        if self._config.borrow_across_departments or self.within_guarantee(job):
            return None
        dept = (self.department(job.team), job.gpu_type)
        dept_used, dept_limit = self._dept_used.get(dept, 0), self._dept_guaranteed.get(dept, 0)
        if dept_used + job.gpus > dept_limit:
            return _quota_reason("department", job, dept_used, dept_limit)
        return None

    def weight(self, team: str) -> float:
        """The team's fair-share weight (times its guaranteed GPUs under `weight_by_guarantee`)."""
        return self._weight.get(team, 1.0)

    def dominant(self, team: str) -> float:
        """The largest fraction of any GPU type's capacity the team holds now."""
        dominant = 0.0
        for gpu_type, capacity in self._capacity.items():
            used = self.used.get((team, gpu_type), 0)
            if used and capacity:
                dominant = max(dominant, used / capacity)
        return dominant

    def past(self, team: str) -> float:
        """The team's decayed past usage, as a share of what the cluster gives in a half-life."""
        return self._past.get(team, 0.0)

    def share(self, team: str) -> float:
        """Weighted dominant share: the largest fraction of any GPU type held, plus past usage."""
        cached = self._shares.get(team)
        if cached is not None:
            return cached
        share = (self.dominant(team) + self.past(team)) / self.weight(team)
        self._shares[team] = share
        return share


def _quota_reason(scope: str, job: JobRequest, used: int, limit: int) -> Reason:
    figures: dict[str, Figure] = {"scope": scope, "used": used, "limit": limit}
    figures["gpu_type"] = job.gpu_type
    return Reason(ReasonCode.QUOTA_EXHAUSTED, {**figures, "requested": job.gpus})


def _past_shares(
    snapshot: Snapshot, config: PolicyConfig, capacity: dict[str, int]
) -> dict[str, float]:
    # Decayed GPU-seconds over what the whole cluster delivers in one half-life: a team that
    # kept the cluster to itself for a half-life counts as a current share of 1.
    window = max(sum(capacity.values()), 1) * max(config.fair_half_life_s, 1.0)
    return {team: usage / window for team, usage in snapshot.past_usage.items()}
