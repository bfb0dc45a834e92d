"""A team held by its budget (`Snapshot.holds`): its waiting jobs say so with the figures and
take nothing; its running jobs and the other teams go on as before."""

from dataclasses import replace

from scheduler import ReasonCode, schedule
from tests.scheduler.builders import NOW, config, job, node, quota, running, snapshot

SPENT = {"spent": "120.00", "budget": "100.00", "currency": "CNY"}
QUOTAS = [quota("alice-lab", 8, 16), quota("bob-lab", 8, 16)]


def test_a_held_teams_jobs_wait_with_the_budget_figures_and_no_estimate() -> None:
    queued = [job(1, "alice-lab", gpus=2), job(2, "alice-lab", gpus=1, submit=NOW - 50)]
    snap = replace(snapshot(queued, [], [node("n1", 8)], QUOTAS), holds={"alice-lab": SPENT})
    decisions = schedule(snap, config())
    assert decisions.admissions == [] and decisions.preemptions == []
    for job_id in (1, 2):
        pending = decisions.pending[job_id]
        assert pending.reason.code is ReasonCode.BUDGET_EXHAUSTED
        assert dict(pending.reason.figures) == SPENT
        assert (pending.estimated_start, pending.estimated_start_range) == (None, None)
    assert decisions.pending[1].reason.message == (
        "team budget used up: 120.00 of 100.00 CNY spent this month"
    )


def test_another_team_starts_and_the_held_teams_running_jobs_go_on() -> None:
    mine = running(job(10, "alice-lab", gpus=4), {"n1": 4})
    queued = [job(1, "alice-lab", gpus=4, submit=NOW - 200), job(2, "bob-lab", gpus=4)]
    snap = replace(snapshot(queued, [mine], [node("n1", 4)], QUOTAS), holds={"alice-lab": SPENT})
    decisions = schedule(snap, config())
    assert [a.job_id for a in decisions.admissions] == [2]
    assert decisions.preemptions == []
    assert decisions.pending[1].reason.code is ReasonCode.BUDGET_EXHAUSTED


def test_a_held_job_is_ahead_of_no_one() -> None:
    queued = [job(1, "alice-lab", gpus=8, submit=NOW - 200), job(2, "bob-lab", gpus=8)]
    snap = replace(snapshot(queued, [], [node("n1", 0)], QUOTAS), holds={"alice-lab": SPENT})
    decisions = schedule(snap, config())
    waiting = decisions.pending[2].reason
    assert waiting.code is not ReasonCode.BUDGET_EXHAUSTED
    assert waiting.figures.get("jobs_ahead", 0) == 0


def test_without_the_hold_the_same_job_starts() -> None:
    snap = snapshot([job(1, "alice-lab", gpus=2)], [], [node("n1", 8)], QUOTAS)
    assert [a.job_id for a in schedule(snap, config()).admissions] == [1]


def test_a_held_job_withdraws_the_preemption_it_asked_for() -> None:
    victim = replace(
        running(job(10, "bob-lab", gpus=8), {"n1": 8}), grace_until=NOW + 30, preempted_for=1
    )
    snap = replace(
        snapshot([job(1, "alice-lab", gpus=8)], [victim], [node("n1", 0)], QUOTAS),
        holds={"alice-lab": SPENT},
    )
    decisions = schedule(snap, config())
    assert decisions.released == [10]
    assert decisions.pending[1].reason.code is ReasonCode.BUDGET_EXHAUSTED
