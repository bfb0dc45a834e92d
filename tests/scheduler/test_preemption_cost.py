"""Preemption worth its cost: victims by work lost and expected end, a bound per job, and lost
work counted apart from useful usage."""

from dataclasses import replace

from scheduler import JobRequest, schedule
from scheduler.metrics import estimate_errors, report
from scheduler.simulate import JobOutcome, SimulationResult
from tests.scheduler.builders import NOW, config, job, node, quota, running, snapshot

QUOTAS = [quota("alice-lab", 8, 16), quota("bob-lab", 8, 16)]
FULL = [node("n1", 0), node("n2", 0)]


def _bob(job_id: int, **changes: object) -> JobRequest:
    return replace(job(job_id, "bob-lab", gpus=8, limit=86_400), **changes)  # type: ignore[arg-type]


def test_a_job_stopped_max_preemptions_times_is_not_preempted_again() -> None:
    bob = [running(_bob(10, restarts=2), {"n1": 8}), running(_bob(11, restarts=2), {"n2": 8})]
    decisions = schedule(snapshot([job(1, gpus=8)], bob, FULL, QUOTAS), config(max_preemptions=2))
    assert decisions.preemptions == []


def test_a_job_expected_to_end_within_the_grace_period_is_not_preempted() -> None:
    ending = running(_bob(10, expected_runtime_s=60.0), {"n1": 8}, started=NOW - 10)
    other = running(_bob(11), {"n2": 8}, started=NOW - 10)
    decisions = schedule(
        snapshot([job(1, gpus=8)], [ending, other], FULL, QUOTAS),
        config(preemption_grace_s=300.0),
    )
    assert [p.job_id for p in decisions.preemptions] == [11]


def test_the_victim_is_the_one_that_loses_the_least_work() -> None:
    old = running(_bob(10), {"n1": 8}, started=NOW - 5000)
    young = running(_bob(11), {"n2": 8}, started=NOW - 100)
    decisions = schedule(snapshot([job(1, gpus=8)], [old, young], FULL, QUOTAS), config())
    assert [p.job_id for p in decisions.preemptions] == [11]


def _outcome(job_id: int, start: float, estimates: tuple[tuple[float, float], ...]) -> JobOutcome:
    return JobOutcome(job_id, "alice-lab", "small", 1, 0.0, start, start + 10, estimates, 0)


def test_estimate_errors_are_median_and_p90_absolute_and_relative() -> None:
    outcomes = [
        _outcome(1, 100.0, ((0.0, 90.0), (50.0, 100.0))),  # 10 s off at submission, then exact
        _outcome(2, 0.5, ((0.0, 0.0),)),  # waited under a second: no relative figure
        _outcome(3, 40.0, ((5.0, 40.0),)),  # first estimate after its submission
    ]
    small = estimate_errors(outcomes)["small"]
    assert small["submit"]["n"] == 2 and small["submit"]["n_relative"] == 1
    assert small["submit"]["p50_rel"] == 0.1
    assert small["change"]["n"] == 4


def test_estimates_overtaken_by_a_later_arrival_are_counted_apart() -> None:
    overtaker = replace(_outcome(9, 50.0, ()), submit=20.0)  # arrived at 20, started at 50
    outcomes = [
        # job 9 overtook the estimate made at 0 (it arrived later and started sooner), not the
        # one made at 30 (it had arrived by then)
        _outcome(1, 100.0, ((0.0, 60.0), (30.0, 100.0))),
        _outcome(2, 40.0, ((0.0, 40.0),)),  # started before 9 did: not overtaken
        overtaker,
    ]
    small = estimate_errors(outcomes)["small"]
    assert small["change"]["n"] == 3
    assert small["change_not_overtaken"]["n"] == 2  # job 1's second estimate and job 2's
    assert small["submit"]["n"] == 2
    assert small["submit_not_overtaken"]["n"] == 1 and small["submit_not_overtaken"]["p50_s"] == 0
    other_type = replace(overtaker, gpu_type="a100-40g")  # another type's arrival passes no one
    alone = estimate_errors([*outcomes[:2], other_type])["small"]
    assert alone["submit_not_overtaken"]["n"] == 2


def test_no_samples_reads_none_and_lost_work_is_not_usage() -> None:
    outcome = JobOutcome(1, "alice-lab", "", 8, 0.0, 0.0, 100.0, (), 1)
    result = SimulationResult((outcome,), 8, 1000.0, 200.0, 1, 1, 0.1, 0)
    figures = report(result, {"alice-lab": 8.0})
    assert figures["eta"] == {}
    assert figures["lost_gpu_s"] == 200.0
    assert figures["usage_pct"] == 100.0 * 800.0 / (8 * 100.0)
