"""Quota: a team's limit, a member's cap, and where beyond its guarantee a team may borrow."""

from scheduler import MemberCap, ReasonCode, TeamInfo, schedule
from tests.scheduler.builders import GPU, NOW, config, job, node, quota, running, snapshot


def test_it_refuses_to_exceed_team_limit() -> None:
    holding = [running(job(9, gpus=8), {"n0": 8}), running(job(8, gpus=8), {"n1": 8})]
    nodes = [node("n0", 0), node("n1", 0), node("n2", 8)]
    snap = snapshot([job(1, gpus=8)], holding, nodes, [quota("alice-lab", 8, 16)])
    decisions = schedule(snap, config())
    assert decisions.admissions == []
    reason = decisions.pending[1].reason
    assert reason.code is ReasonCode.QUOTA_EXHAUSTED
    assert reason.figures == {
        "scope": "team",
        "used": 16,
        "limit": 16,
        "gpu_type": GPU,
        "requested": 8,
    }
    assert reason.message == "team uses 16 of limit 16 h100-80g"


def test_a_team_without_quota_for_a_type_may_not_use_it() -> None:
    decisions = schedule(snapshot([job(1)], nodes=[node("n1", 8)]), config())
    assert decisions.admissions == []
    assert decisions.pending[1].reason.figures["limit"] == 0


def test_it_refuses_to_exceed_a_member_cap() -> None:
    holding = running(job(9, gpus=4, member="carol"), {"n0": 4})
    queued = [job(1, gpus=4, member="carol"), job(2, gpus=4, member="dave")]
    caps = [MemberCap("alice-lab", "carol", 6)]
    snap = snapshot(
        queued, [holding], [node("n0", 4), node("n1", 8)], [quota("alice-lab", 16, 16)], caps=caps
    )
    decisions = schedule(snap, config())
    assert [a.job_id for a in decisions.admissions] == [2]
    reason = decisions.pending[1].reason
    assert reason.code is ReasonCode.MEMBER_CAP
    assert reason.figures == {
        "member": "carol",
        "team": "alice-lab",
        "used": 4,
        "cap": 6,
        "requested": 4,
    }


def test_it_borrows_only_within_the_department_when_cross_borrowing_is_off() -> None:
    teams = [
        TeamInfo("alice-lab", "physics"),
        TeamInfo("bob-lab", "physics"),
        TeamInfo("eve-lab", "bio"),
    ]
    quotas = [quota("alice-lab", 4, 16), quota("bob-lab", 4, 16), quota("eve-lab", 8, 16)]
    queued = [job(1, "alice-lab", gpus=8), job(2, "alice-lab", gpus=4, submit=NOW)]
    snap = snapshot(queued, nodes=[node("n1", 8), node("n2", 8)], quotas=quotas, teams=teams)
    decisions = schedule(snap, config(borrow_across_departments=False))
    assert [a.job_id for a in decisions.admissions] == [1]
    reason = decisions.pending[2].reason
    assert reason.code is ReasonCode.QUOTA_EXHAUSTED
    assert reason.figures["scope"] == "department"
    assert (reason.figures["used"], reason.figures["limit"]) == (8, 8)
    decisions = schedule(snap, config(borrow_across_departments=True))
    assert sorted(a.job_id for a in decisions.admissions) == [1, 2]
