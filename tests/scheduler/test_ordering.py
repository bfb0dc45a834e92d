"""Order of admission: within a team by queue priority then FIFO; across teams by the policy."""

from scheduler import Policy, TeamInfo, schedule
from tests.scheduler.builders import NOW, config, job, node, quota, snapshot


def admitted(decisions: object) -> list[int]:
    return [a.job_id for a in decisions.admissions]  # type: ignore[attr-defined]


def test_it_admits_higher_queue_priority_first_within_a_team() -> None:
    queued = [job(1, gpus=8, submit=NOW - 50), job(2, gpus=8, submit=NOW - 10, priority=5)]
    decisions = schedule(
        snapshot(queued, nodes=[node("n1", 8)], quotas=[quota("alice-lab", 16, 16)]), config()
    )
    assert admitted(decisions) == [2]


def test_it_admits_in_submission_order_within_one_priority() -> None:
    queued = [job(1, gpus=8, submit=NOW - 10), job(2, gpus=8, submit=NOW - 50)]
    decisions = schedule(
        snapshot(queued, nodes=[node("n1", 8)], quotas=[quota("alice-lab", 16, 16)]), config()
    )
    assert admitted(decisions) == [2]


def test_fifo_policy_orders_all_teams_by_submission() -> None:
    queued = [
        job(1, "alice-lab", gpus=8, submit=NOW - 10),
        job(2, "bob-lab", gpus=8, submit=NOW - 20),
    ]
    quotas = [quota("alice-lab", 8, 8), quota("bob-lab", 8, 8)]
    decisions = schedule(
        snapshot(queued, nodes=[node("n1", 8)], quotas=quotas), config(policy=Policy.FIFO)
    )
    assert admitted(decisions) == [2]


def test_fair_policy_serves_the_team_with_the_lowest_share_first() -> None:
    heavy = job(9, "alice-lab", gpus=8)
    queued = [
        job(1, "alice-lab", gpus=8, submit=NOW - 50),
        job(2, "bob-lab", gpus=8, submit=NOW - 10),
    ]
    quotas = [quota("alice-lab", 8, 16), quota("bob-lab", 8, 16)]
    nodes = [node("n0", 0), node("n1", 8)]
    from tests.scheduler.builders import running

    snap = snapshot(queued, [running(heavy, {"n0": 8})], nodes, quotas)
    assert admitted(schedule(snap, config(policy=Policy.FAIR))) == [2]
    assert admitted(schedule(snap, config(policy=Policy.FIFO))) == [1]


def test_fair_policy_counts_decayed_past_usage_divided_by_weight() -> None:
    queued = [
        job(1, "alice-lab", gpus=8, submit=NOW - 50),
        job(2, "bob-lab", gpus=8, submit=NOW - 10),
    ]
    quotas = [quota("alice-lab", 8, 8), quota("bob-lab", 8, 8)]
    teams = [TeamInfo("alice-lab"), TeamInfo("bob-lab")]
    snap = snapshot(
        queued, nodes=[node("n1", 8)], quotas=quotas, teams=teams, past_usage={"alice-lab": 1e6}
    )
    assert admitted(schedule(snap, config(policy=Policy.FAIR))) == [2]
    weighted = [TeamInfo("alice-lab", weight=1000.0), TeamInfo("bob-lab")]
    usage = {"alice-lab": 1e6, "bob-lab": 1e5}
    snap = snapshot(queued, nodes=[node("n1", 8)], quotas=quotas, teams=weighted, past_usage=usage)
    assert admitted(schedule(snap, config(policy=Policy.FAIR))) == [1]


def test_capacity_policy_serves_work_within_guarantee_before_borrowing() -> None:
    queued = [
        job(1, "alice-lab", gpus=8, submit=NOW - 50),
        job(2, "bob-lab", gpus=8, submit=NOW - 10),
    ]
    quotas = [quota("alice-lab", 0, 16), quota("bob-lab", 8, 16)]
    snap = snapshot(queued, nodes=[node("n1", 8)], quotas=quotas)
    assert admitted(schedule(snap, config(policy=Policy.CAPACITY))) == [2]
    assert admitted(schedule(snap, config(policy=Policy.FIFO))) == [1]


def test_aging_lets_a_starving_low_priority_job_go_first() -> None:
    old = job(1, gpus=8, submit=NOW - 200_000)
    urgent = job(2, gpus=8, submit=NOW - 10, priority=100)
    snap = snapshot([old, urgent], nodes=[node("n1", 8)], quotas=[quota("alice-lab", 16, 16)])
    assert admitted(schedule(snap, config(starvation_after_s=86_400.0))) == [1]
    assert admitted(schedule(snap, config(starvation_after_s=None))) == [2]


def test_it_decides_the_same_for_the_same_snapshot_whatever_the_input_order() -> None:
    queued = [job(i, f"team-{i % 3}", gpus=1 + i % 4, submit=NOW - i % 5) for i in range(40)]
    quotas = [quota(f"team-{t}", 4, 12) for t in range(3)]
    nodes = [node(f"n{i}", 8) for i in range(3)]
    first = schedule(snapshot(queued, nodes=nodes, quotas=quotas), config())
    second = schedule(
        snapshot(reversed(queued), nodes=reversed(nodes), quotas=reversed(quotas)), config()
    )
    assert first == second
