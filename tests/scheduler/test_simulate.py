"""simulate(): the what-if engine replays a workload through the real scheduler."""

from scheduler import JobRequest, NodeState, PolicyConfig, QuotaInfo, TeamInfo
from scheduler.metrics import report
from scheduler.simulate import Trace, TraceJob, simulate


def workload(alice_guaranteed: int) -> Trace:
    nodes = tuple(NodeState(f"n{i}", "h100", 8, 8) for i in range(2))
    teams = (TeamInfo("alice-lab"), TeamInfo("bob-lab"))
    quotas = (
        QuotaInfo("alice-lab", "h100", alice_guaranteed, 16),
        QuotaInfo("bob-lab", "h100", 8, 16),
    )
    jobs = []
    for i in range(40):
        team = "alice-lab" if i % 2 else "bob-lab"
        request = JobRequest(i + 1, team, f"{team}-user", "h100", 1, 4, i * 10.0, 400.0)
        jobs.append(TraceJob(request, 300.0, "4-gpu"))
    return Trace(tuple(jobs), nodes, teams, quotas)


def test_it_runs_every_job_without_quota_violations() -> None:
    result = simulate(workload(8), PolicyConfig())
    assert all(o.start is not None and o.end is not None for o in result.outcomes)
    assert result.quota_violations == 0
    figures = report(result, {"alice-lab": 8, "bob-lab": 8})
    assert 0 < figures["usage_pct"] <= 100  # type: ignore[operator]


def test_the_same_trace_and_configuration_give_the_same_run() -> None:
    assert (
        simulate(workload(8), PolicyConfig()).outcomes
        == simulate(workload(8), PolicyConfig()).outcomes
    )


def test_what_if_a_team_with_no_quota_waits_for_the_other_teams_jobs() -> None:
    starved = simulate(workload(0), PolicyConfig(borrow_across_departments=False))
    alice = [o for o in starved.outcomes if o.team == "alice-lab"]
    assert all(o.start is None for o in alice)  # nothing of its own, nothing to borrow
    served = simulate(workload(8), PolicyConfig(borrow_across_departments=False))
    assert all(o.start is not None for o in served.outcomes if o.team == "alice-lab")
