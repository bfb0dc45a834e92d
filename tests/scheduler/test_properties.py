"""Properties over random snapshots: safety (limits, capacity, gangs), preemption, determinism."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import (
    Decisions,
    JobRequest,
    NodeState,
    Policy,
    PolicyConfig,
    QuotaInfo,
    ReasonCode,
    RunningJob,
    Snapshot,
    TeamInfo,
    schedule,
)

NOW = 10_000.0
TYPES = ("a100", "h100")
SETTINGS = settings(max_examples=150, deadline=None)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    rng = random.Random(draw(st.integers(0, 2**32)))
    teams = tuple(
        TeamInfo(f"t{i}", f"d{i % 2}", rng.choice([1.0, 2.0])) for i in range(rng.randint(1, 4))
    )
    quotas = []
    for team in teams:
        for gpu_type in TYPES:
            guaranteed = rng.randint(0, 12)
            quotas.append(
                QuotaInfo(team.name, gpu_type, guaranteed, guaranteed + rng.randint(0, 12))
            )
    limits = {(q.team, q.gpu_type): q.limit for q in quotas}
    nodes = [
        NodeState(
            f"n{i}",
            rng.choice(TYPES),
            8,
            8,
            {"rack": f"r{i % 3}"},
            rng.random() < 0.1,
            rng.random() > 0.05,
        )
        for i in range(rng.randint(1, 8))
    ]
    free = {n.name: 8 for n in nodes}
    used: dict[tuple[str, str], int] = {}
    running = []
    for job_id in range(1000, 1000 + rng.randint(0, 10)):
        job = _random_job(rng, job_id, teams)
        spots = [n for n in nodes if n.gpu_type == job.gpu_type and free[n.name] >= job.gpus]
        key = (job.team, job.gpu_type)
        if not spots or used.get(key, 0) + job.gpus > limits[key]:
            continue
        spot = rng.choice(spots)
        free[spot.name] -= job.gpus
        used[key] = used.get(key, 0) + job.gpus
        started = NOW - rng.uniform(0, 5000)
        running.append(RunningJob(job, started, ((spot.name, job.gpus),)))
    queued = tuple(_random_job(rng, i, teams) for i in range(rng.randint(0, 25)))
    return Snapshot(
        NOW,
        queued,
        tuple(running),
        tuple(replace(n, free_gpus=free[n.name]) for n in nodes),
        teams,
        tuple(quotas),
        past_usage={t.name: rng.uniform(0, 1e6) for t in teams},
    )


def _random_job(rng: random.Random, job_id: int, teams: tuple[TeamInfo, ...]) -> JobRequest:
    nodes = 1 if rng.random() < 0.8 else rng.randint(2, 3)
    return JobRequest(
        job_id,
        rng.choice(teams).name,
        f"m{rng.randint(0, 2)}",
        rng.choice(TYPES),
        nodes,
        rng.choice([1, 1, 2, 4, 8]),
        NOW - rng.uniform(0, 1000),
        rng.choice([600.0, 3600.0, 86_400.0]),
        rng.choice([0, 0, 5]),
        rng.random() < 0.8,
    )


configs = st.builds(
    PolicyConfig,
    policy=st.sampled_from(list(Policy)),
    borrow_across_departments=st.booleans(),
    preemption_grace_s=st.sampled_from([0.0, 120.0]),
    max_reservations=st.sampled_from([0, 2, 64]),
)


def _after(
    snapshot: Snapshot, decisions: Decisions
) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """Team usage and node free GPUs once the decisions are applied (victims stop at once)."""
    stopped = {p.job_id for p in decisions.preemptions}
    used: dict[tuple[str, str], int] = {}
    free = {n.name: n.free_gpus for n in snapshot.nodes}
    queued = {j.id: j for j in snapshot.queued}
    for running in snapshot.running:
        if running.job.id in stopped:
            for node, gpus in running.placement:
                free[node] += gpus
        else:
            key = (running.job.team, running.job.gpu_type)
            used[key] = used.get(key, 0) + running.job.gpus
    for admission in decisions.admissions:
        job = queued[admission.job_id]
        used[(job.team, job.gpu_type)] = used.get((job.team, job.gpu_type), 0) + job.gpus
        for node, gpus in admission.placement:
            free[node] -= gpus
    return used, free


@SETTINGS
@given(snapshots(), configs)
def test_no_team_ever_exceeds_its_limit(snapshot: Snapshot, config: PolicyConfig) -> None:
    decisions = schedule(snapshot, config)
    used, _ = _after(snapshot, decisions)
    limits = {(q.team, q.gpu_type): q.limit for q in snapshot.quotas}
    admitted = {
        (j.team, j.gpu_type)
        for j in snapshot.queued
        if j.id in {a.job_id for a in decisions.admissions}
    }
    for key in admitted:
        assert used[key] <= limits[key]


@SETTINGS
@given(snapshots(), configs)
def test_no_node_ever_exceeds_its_capacity(snapshot: Snapshot, config: PolicyConfig) -> None:
    decisions = schedule(snapshot, config)
    _, free = _after(snapshot, decisions)
    assert all(gpus >= 0 for gpus in free.values())
    nodes = {n.name: n for n in snapshot.nodes}
    queued = {j.id: j for j in snapshot.queued}
    for admission in decisions.admissions:
        for node, _ in admission.placement:
            assert nodes[node].schedulable
            assert nodes[node].gpu_type == queued[admission.job_id].gpu_type


@SETTINGS
@given(snapshots(), configs)
def test_gangs_are_placed_whole_or_not_at_all(snapshot: Snapshot, config: PolicyConfig) -> None:
    decisions = schedule(snapshot, config)
    queued = {j.id: j for j in snapshot.queued}
    for admission in decisions.admissions:
        job = queued[admission.job_id]
        assert sum(g for _, g in admission.placement) == job.gpus
        # One pod per node, as the Job's anti-affinity lets Kubernetes run them all at once.
        assert len(admission.placement) == job.nodes
        assert all(g == job.gpus_per_node for _, g in admission.placement)
    assert {a.job_id for a in decisions.admissions}.isdisjoint(decisions.pending)
    assert {a.job_id for a in decisions.admissions} | set(decisions.pending) == set(queued)


@SETTINGS
@given(snapshots(), configs)
def test_every_preemption_makes_room_for_a_job_that_then_fits(
    snapshot: Snapshot, config: PolicyConfig
) -> None:
    decisions = schedule(snapshot, config)
    admitted = {a.job_id for a in decisions.admissions}
    running = {r.job.id: r for r in snapshot.running}
    for preemption in decisions.preemptions:
        beneficiary = preemption.for_job_id
        assert (
            beneficiary in admitted
            or decisions.pending[beneficiary].reason.code is ReasonCode.PREEMPTING
        )
        victim = running[preemption.job_id]
        assert victim.job.preemptible or victim.job.team != _job(snapshot, beneficiary).team
        assert preemption.grace_until == NOW + config.preemption_grace_s


def _job(snapshot: Snapshot, job_id: int) -> JobRequest:
    return next(j for j in snapshot.queued if j.id == job_id)


@SETTINGS
@given(snapshots(), configs, st.randoms(use_true_random=False))
def test_the_same_snapshot_gives_the_same_decisions(
    snapshot: Snapshot, config: PolicyConfig, rng: random.Random
) -> None:
    shuffled = replace(
        snapshot,
        queued=tuple(rng.sample(snapshot.queued, len(snapshot.queued))),
        running=tuple(rng.sample(snapshot.running, len(snapshot.running))),
        nodes=tuple(rng.sample(snapshot.nodes, len(snapshot.nodes))),
        quotas=tuple(rng.sample(snapshot.quotas, len(snapshot.quotas))),
    )
    assert schedule(snapshot, config) == schedule(shuffled, config)


@settings(max_examples=60, deadline=None)
@given(
    borrowers=st.integers(1, 4),
    wanted=st.integers(1, 8),
    grace=st.sampled_from([0.0, 60.0]),
    policy=st.sampled_from(list(Policy)),
)
def test_a_team_within_its_guarantee_is_served_within_two_cycles_when_others_borrow(
    borrowers: int, wanted: int, grace: float, policy: Policy
) -> None:
    # Four 8-GPU nodes, all held by borrowing teams with day-long jobs; "owner" owns 16 GPUs.
    teams = (TeamInfo("owner"), *(TeamInfo(f"b{i}") for i in range(borrowers)))
    quotas = (
        QuotaInfo("owner", "h100", 16, 16),
        *(QuotaInfo(t.name, "h100", 0, 32) for t in teams[1:]),
    )
    nodes = tuple(NodeState(f"n{i}", "h100", 8, 0) for i in range(4))
    running = tuple(
        RunningJob(
            JobRequest(100 + i, f"b{i % borrowers}", "m", "h100", 1, 8, 0.0, 86_400.0),
            NOW - 10 * i,
            ((f"n{i}", 8),),
        )
        for i in range(4)
    )
    queued = (JobRequest(1, "owner", "m", "h100", 1, wanted, NOW, 3600.0),)
    snapshot = Snapshot(NOW, queued, running, nodes, teams, quotas)
    config = PolicyConfig(policy=policy, preemption_grace_s=grace)
    for _ in range(2):
        decisions = schedule(snapshot, config)
        if any(a.job_id == 1 for a in decisions.admissions):
            return
        snapshot = _next_cycle(snapshot, decisions, grace)
    raise AssertionError("the owner's job was not served within two cycles")


def _next_cycle(snapshot: Snapshot, decisions: Decisions, grace: float) -> Snapshot:
    """Victims have stopped when their grace ends; that is when the next cycle runs."""
    marked = {p.job_id: p for p in decisions.preemptions}
    running = [r for r in snapshot.running if r.job.id not in marked and r.grace_until is None]
    free = {n.name: n.free_gpus for n in snapshot.nodes}
    for r in snapshot.running:
        if r.job.id in marked or r.grace_until is not None:
            for node, gpus in r.placement:
                free[node] += gpus
    nodes = tuple(replace(n, free_gpus=free[n.name]) for n in snapshot.nodes)
    return replace(snapshot, now=snapshot.now + grace + 1, running=tuple(running), nodes=nodes)
