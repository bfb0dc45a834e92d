"""Health inspections on a fake clock over scripted samples: each check passes a healthy node
and fails (or warns) the one scripted to; a failing node raises one alert across runs, resolved
once it passes; a passing inspection brings back the fault loop's cordoned node, never an
admin's; admins alone run one on demand and read the reports."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from agent.core import Agent
from agent.transport import Transport
from audit.models import AuditEvent
from cluster.actions import set_cordon
from cluster.backend import ClusterBackend
from cluster.controller import Controller, Timing
from cluster.models import Gpu, Node
from kubesim import KubeSim
from kubesim.clock import ManualClock
from monitoring import hot
from monitoring.alerts.round import evaluate_alerts
from monitoring.ingest import Accepted, ingest_batches
from monitoring.inspections import inspect
from monitoring.models import Alert, AlertRule, Incident, InspectionResult, InspectionRun
from monitoring.validation import validate_batch
from tests.cluster.conftest import SteppedClock
from tests.conftest import World
from tests.notifications.eager import eager_celery  # noqa: F401 (autouse)

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NODES = ("h100-a-1", "h100-a-2", "h100-a-3")
DRIVER = {
    "nvidia.com/cuda.driver.major": "550",
    "nvidia.com/cuda.driver.minor": "54",
    "nvidia.com/cuda.driver.rev": "15",
}
Samples = dict[int, dict[str, Any]]


class FakeClock:
    """`timezone.now()`, standing still until the test moves it."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


class Cordons:
    """The cluster as far as cordoning goes: what it was told, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        self.calls.append((node, unschedulable))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timezone, "now", fake)
    return fake


@pytest.fixture
def cordons(monkeypatch: pytest.MonkeyPatch) -> Cordons:
    fake = Cordons()
    monkeypatch.setattr("cluster.connect.backend", lambda: fake)  # the Celery task's cluster
    return fake


@pytest.fixture
def fleet(world: World) -> dict[str, Node]:
    return {
        name: Node.objects.create(
            name=name,
            gpu_type=world.h100,
            gpu_capacity=8,
            gpu_allocatable=8,
            ready=True,
            labels=dict(DRIVER),
            agent_token_hash="x" * 64,
        )
        for name in NODES
    }


def healthy(at: datetime) -> Samples:
    return {
        i: {
            "index": i,
            "at": at.timestamp(),
            "DCGM_FI_DEV_GPU_TEMP": 60,
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 0,
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0,
            "DCGM_FI_DEV_ROW_REMAP_PENDING": 0,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
            "PORTAL_NVLINK_LINKS_UP": 18,
            "PORTAL_NVLINK_LINKS_DOWN": 0,
            "job_id": None,
        }
        for i in range(8)
    }


def report(fleet: dict[str, Node], clock: FakeClock, **changed: Samples) -> None:
    """Every node's latest samples as the agents' posts leave them: healthy, unless given."""
    hot.store({node.pk: changed.get(name, healthy(clock.now)) for name, node in fleet.items()})


def run(clock: FakeClock, backend: Cordons | None = None, by: User | None = None) -> InspectionRun:
    backend = backend or Cordons()
    return inspect(clock.now, backend=cast(ClusterBackend, backend), requested_by=by)


def statuses(run: InspectionRun, node: str) -> dict[str, str]:
    rows = InspectionResult.objects.filter(run=run, node__name=node)
    return dict(rows.values_list("check_name", "status"))


def failing(run: InspectionRun, node: str) -> set[str]:
    return {check for check, status in statuses(run, node).items() if status == "fail"}


def test_a_healthy_fleet_passes_every_check(fleet: dict[str, Node], clock: FakeClock) -> None:
    Node.objects.create(name="cpu-1", ready=True)  # no GPU, no agent: not inspected
    report(fleet, clock)
    done = run(clock)
    assert not InspectionResult.objects.filter(node__name="cpu-1").exists()
    assert (done.nodes_passed, done.nodes_failed, done.trigger) == (3, 0, "schedule")
    assert done.finished_at == T0
    checks = statuses(done, "h100-a-1")
    assert set(checks) == {
        "heartbeat",
        "gpus",
        "ecc",
        "ecc_corrected",
        "remap",
        "temperature",
        "throttling",
        "nvlink",
        "driver",
    }
    assert set(checks.values()) == {"ok"}


def _set(field: str, value: Any, index: int = 3) -> Callable[[Samples], None]:
    def change(samples: Samples) -> None:
        samples[index][field] = value

    return change


def _stale(samples: Samples) -> None:
    for sample in samples.values():
        sample["at"] -= 301


FAULTS = {
    # case: (what happens to h100-a-1's samples, the checks it fails)
    "stale heartbeat": (_stale, {"heartbeat"}),
    "missing GPU": (lambda samples: samples.pop(7), {"gpus"}),
    "uncorrected ECC": (_set("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 2), {"ecc"}),
    "remap pending": (_set("DCGM_FI_DEV_ROW_REMAP_PENDING", 1), {"remap"}),
    "hot GPU": (_set("DCGM_FI_DEV_GPU_TEMP", 91), {"temperature"}),
    "hardware throttling": (_set("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 0x40), {"throttling"}),
    "NVLink down": (_set("PORTAL_NVLINK_LINKS_DOWN", 2), {"nvlink"}),
}


@pytest.mark.parametrize("case", list(FAULTS))
def test_each_check_fails_the_node_scripted_to_and_only_that_check(
    fleet: dict[str, Node], clock: FakeClock, case: str
) -> None:
    change, expected = FAULTS[case]
    samples = healthy(clock.now)
    change(samples)
    report(fleet, clock, **{"h100-a-1": samples})
    done = run(clock)
    assert failing(done, "h100-a-1") == expected
    assert failing(done, "h100-a-2") == set()
    assert (done.nodes_passed, done.nodes_failed) == (2, 1)


def test_a_node_not_ready_or_offering_fewer_gpus_fails(
    fleet: dict[str, Node], clock: FakeClock
) -> None:
    Node.objects.filter(name="h100-a-1").update(ready=False)
    Node.objects.filter(name="h100-a-2").update(gpu_allocatable=7)
    report(fleet, clock)
    done = run(clock)
    assert failing(done, "h100-a-1") == {"heartbeat"}
    assert failing(done, "h100-a-2") == {"gpus"}
    detail = InspectionResult.objects.get(run=done, node__name="h100-a-2", check_name="gpus").detail
    assert "7 of 8" in detail


def test_driver_drift_fails_the_node_off_the_fleets_version(
    fleet: dict[str, Node], clock: FakeClock
) -> None:
    labels = {**DRIVER, "nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.driver.rev": "5"}
    Node.objects.filter(name="h100-a-3").update(labels=labels)
    report(fleet, clock)
    done = run(clock)
    assert failing(done, "h100-a-3") == {"driver"}
    assert failing(done, "h100-a-1") == set()
    detail = InspectionResult.objects.get(run=done, node__name="h100-a-3", check_name="driver")
    assert "535.54.5" in detail.detail and "550.54.15" in detail.detail


def test_what_needs_watching_warns_but_passes(fleet: dict[str, Node], clock: FakeClock) -> None:
    report(fleet, clock)
    run(clock)
    samples = healthy(clock.advance(1800))
    samples[1]["DCGM_FI_DEV_GPU_TEMP"] = 85
    samples[2]["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"] = 0x4  # the driver's power cap
    samples[4]["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"] = 5000
    Gpu.objects.create(node=fleet["h100-a-1"], index=6, healthy=False)
    report(fleet, clock, **{"h100-a-1": samples})
    done = run(clock)
    found = statuses(done, "h100-a-1")
    warned = {check for check, status in found.items() if status == "warn"}
    assert warned == {"temperature", "throttling", "ecc_corrected", "gpus"}
    assert set(found.values()) == {"ok", "warn"}
    assert done.nodes_failed == 0


def test_uncorrected_errors_report_their_growth_since_the_last_inspection(
    fleet: dict[str, Node], clock: FakeClock
) -> None:
    samples = healthy(clock.now)
    samples[3]["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"] = 1
    report(fleet, clock, **{"h100-a-1": samples})
    run(clock)
    samples = healthy(clock.advance(1800))
    samples[3]["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"] = 4
    report(fleet, clock, **{"h100-a-1": samples})
    done = run(clock)
    ecc = InspectionResult.objects.get(run=done, node__name="h100-a-1", check_name="ecc")
    assert (ecc.status, ecc.figure) == ("fail", 4)
    assert "+3" in ecc.detail


def ib_ports(at: datetime, down: tuple[str, ...] = ()) -> dict[str, Any]:
    """A node-level reading of four InfiniBand ports, `down` among them."""
    return {
        "at": at.timestamp(),
        "PORTAL_IB_PORTS_UP": 4 - len(down),
        "PORTAL_IB_PORTS_DOWN": len(down),
        "ib_down": list(down),
    }


def test_an_infiniband_port_down_fails_the_node_and_no_infiniband_is_no_finding(
    fleet: dict[str, Node], clock: FakeClock
) -> None:
    report(fleet, clock)
    readings = {
        fleet["h100-a-1"].pk: ib_ports(clock.now, down=("mlx5_2/1",)),
        fleet["h100-a-2"].pk: ib_ports(clock.now),
    }
    hot.store({}, readings)  # h100-a-3 reports no InfiniBand
    done = run(clock)
    assert failing(done, "h100-a-1") == {"infiniband"}
    assert statuses(done, "h100-a-2")["infiniband"] == "ok"
    assert "infiniband" not in statuses(done, "h100-a-3")
    found = InspectionResult.objects.get(run=done, node__name="h100-a-1", check_name="infiniband")
    assert found.figure == 1 and "1 of 4 InfiniBand ports down: mlx5_2/1" in found.detail


def test_a_stale_infiniband_reading_judges_nothing(
    fleet: dict[str, Node], clock: FakeClock
) -> None:
    hot.store({}, {fleet["h100-a-1"].pk: ib_ports(clock.now, down=("mlx5_0/1",))})
    clock.advance(301)
    report(fleet, clock)  # the GPUs speak, the node-level reading is old
    assert "infiniband" not in statuses(run(clock), "h100-a-1")


def test_the_driver_its_agent_reports_comes_before_the_labels(
    fleet: dict[str, Node], clock: FakeClock
) -> None:
    Node.objects.filter(name__in=NODES[:2]).update(driver_version="570.86.15")
    report(fleet, clock)
    done = run(clock)  # h100-a-3 reports none: its labels say 550.54.15
    assert failing(done, "h100-a-3") == {"driver"}
    assert failing(done, "h100-a-1") == set()


def test_drift_and_a_port_down_in_kubesim_reach_the_inspection_through_the_agent(
    fleet: dict[str, Node], clock: FakeClock, tmp_path: Path
) -> None:
    sim = KubeSim(clock=ManualClock(clock.now.timestamp()))  # never served: calls run here
    fabric = sim.infiniband(tmp_path)
    sim.inject_fault("driver-drift", "h100-a-3")
    sim.inject_fault("ib-port-down", "h100-a-2", link=1)
    fabric.refresh()
    for name, node in fleet.items():
        sent: list[dict[str, Any]] = []
        agent = Agent(
            name,
            cast(Transport, SimpleNamespace(post=sent.append)),
            library=sim.nvml_library(name),
            clock=lambda: clock.now.timestamp(),
            ib_root=fabric.root(name),
        )
        agent.open()
        try:
            agent.sample_once()
            agent.flush()
        finally:
            agent.close()
        batch, errors = validate_batch(json.loads(json.dumps(sent[0])), clock.now.timestamp())
        assert errors == {} and batch is not None
        ingest_batches([Accepted(node.pk, name, batch)])
    drivers = dict(Node.objects.values_list("name", "driver_version"))
    assert drivers == {"h100-a-1": "570.86.15", "h100-a-2": "570.86.15", "h100-a-3": "550.54.15"}
    done = run(clock)
    assert failing(done, "h100-a-1") == set()
    assert failing(done, "h100-a-2") == {"infiniband"}
    assert failing(done, "h100-a-3") == {"driver"}
    found = InspectionResult.objects.get(run=done, node__name="h100-a-3", check_name="driver")
    assert "550.54.15" in found.detail and "570.86.15" in found.detail


def _only(name: str) -> None:
    AlertRule.objects.exclude(name=name).update(enabled=False)


def test_a_failing_node_raises_one_alert_until_an_inspection_passes_it(
    fleet: dict[str, Node], clock: FakeClock
) -> None:
    _only("Inspection failed")  # the default rule: critical at one failed check
    hot_gpu = healthy(clock.now)
    hot_gpu[0]["DCGM_FI_DEV_GPU_TEMP"] = 95
    report(fleet, clock, **{"h100-a-1": hot_gpu})
    run(clock)
    evaluate_alerts(clock.now)
    alert = Alert.objects.get()
    assert (alert.subject, alert.state, alert.level) == ("h100-a-1", "firing", "critical")
    assert alert.node == fleet["h100-a-1"]
    for _ in range(2):  # still failing: the same alert
        run(clock)
        evaluate_alerts(clock.advance(60))
        assert list(Alert.objects.values_list("pk", "state")) == [(alert.pk, "firing")]
    report(fleet, clock)
    evaluate_alerts(clock.advance(5))  # the samples alone change nothing: the report does
    assert Alert.objects.get().state == "firing"
    run(clock)
    evaluate_alerts(clock.advance(5))
    assert list(Alert.objects.values_list("pk", "state")) == [(alert.pk, "resolved")]


def _cordoned_by_the_fault_loop(node: Node, backend: Cordons) -> None:
    reason = "drain and reboot the node after Xid 79 (GPU has fallen off the bus)"
    set_cordon(node, True, reason=reason, acting_user=None, backend=cast(ClusterBackend, backend))


def test_a_passing_inspection_brings_back_the_fault_loops_node_only(
    world: World, fleet: dict[str, Node], clock: FakeClock
) -> None:
    backend = Cordons()
    faulty, by_hand, later_by_hand = (fleet[name] for name in NODES)
    _cordoned_by_the_fault_loop(faulty, backend)
    incident = Incident.objects.create(
        title="reboot on h100-a-1", action="reboot", opened_at=T0, nodes=[faulty.name]
    )
    set_cordon(
        by_hand,
        True,
        reason="maintenance",
        acting_user=world.admin,
        backend=cast(ClusterBackend, backend),
    )
    _cordoned_by_the_fault_loop(later_by_hand, backend)
    set_cordon(
        later_by_hand,
        False,
        reason="",
        acting_user=world.admin,
        backend=cast(ClusterBackend, backend),
    )
    Node.objects.filter(pk=later_by_hand.pk).update(cordoned=True)  # kubectl cordon, outside
    report(fleet, clock)
    backend.calls.clear()
    done = run(clock, backend)
    assert done.uncordoned == ["h100-a-1"]
    assert backend.calls == [("h100-a-1", False)]
    cordoned = dict(Node.objects.values_list("name", "cordoned"))
    assert cordoned == {"h100-a-1": False, "h100-a-2": True, "h100-a-3": True}
    event = AuditEvent.chain.filter(action="node.uncordon", target_id=str(faulty.pk)).get()
    assert event.actor_id is None and event.after is not None
    assert f"inspection {done.pk}" in event.after["reason"]
    assert incident.events.filter(kind="action", text__contains="uncordoned").exists()


def test_a_failing_inspection_leaves_the_fault_loops_node_cordoned(
    fleet: dict[str, Node], clock: FakeClock
) -> None:
    backend = Cordons()
    _cordoned_by_the_fault_loop(fleet["h100-a-1"], backend)
    samples = healthy(clock.now)
    samples.pop(5)  # the GPU that fell off the bus is still gone
    report(fleet, clock, **{"h100-a-1": samples})
    backend.calls.clear()
    done = run(clock, backend)
    assert done.uncordoned == [] and backend.calls == []
    assert Node.objects.get(name="h100-a-1").cordoned


def _as(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_admin_runs_an_inspection_now_and_reads_its_report(
    world: World,
    fleet: dict[str, Node],
    clock: FakeClock,
    cordons: Cordons,
    django_assert_max_num_queries: Any,
) -> None:
    samples = healthy(clock.now)
    samples[2]["PORTAL_NVLINK_LINKS_DOWN"] = 1
    report(fleet, clock, **{"h100-a-2": samples})
    admin = _as(world.admin)
    response = admin.post("/inspections/run/")
    assert response.status_code == 302 and response["Location"] == "/inspections/"
    done = InspectionRun.objects.get()
    assert (done.trigger, done.requested_by, done.nodes_failed) == ("admin", world.admin, 1)
    audited = AuditEvent.chain.get(action="inspection.run")
    assert audited.actor_id == world.admin.pk and audited.after == {
        "trigger": "admin",
        "passed": 2,
        "failed": 1,
    }
    with django_assert_max_num_queries(8):
        listing = admin.get("/inspections/").content.decode()
    assert f"/inspections/{done.pk}/" in listing
    with django_assert_max_num_queries(8):
        page = admin.get(f"/inspections/{done.pk}/").content.decode()
    rows = [page.index(name) for name in ("h100-a-2", "h100-a-1", "h100-a-3")]
    assert rows == sorted(rows)  # the failing node first, then by name
    assert "NVLink links down on gpu2" in page


def test_only_admins_run_or_read_inspections(
    world: World, fleet: dict[str, Node], clock: FakeClock, cordons: Cordons
) -> None:
    report(fleet, clock)
    done = run(clock)
    for user in (world.alice, world.bob, world.carol):
        client = _as(user)
        assert client.post("/inspections/run/").status_code == 403
        for url in ("/inspections/", f"/inspections/{done.pk}/"):
            assert client.get(url).status_code == 403, url
    assert InspectionRun.objects.count() == 1
    assert _as(world.admin).get("/inspections/").status_code == 200


def test_the_leading_controller_inspects_every_configured_period(
    fleet: dict[str, Node], clock: FakeClock, cordons: Cordons, settings: Any
) -> None:
    settings.INSPECTION_EVERY_MINUTES = 10
    controller = Controller(cast(ClusterBackend, object()), timing=Timing(), clock=SteppedClock())
    duty = controller.duties["inspection"]
    assert duty.every_s == 600
    report(fleet, clock)
    duty.run()  # enqueued; run at once (eager Celery)
    done = InspectionRun.objects.get()
    assert (done.trigger, done.requested_by, done.nodes_passed) == ("schedule", None, 3)


def test_old_inspections_are_pruned(
    fleet: dict[str, Node], clock: FakeClock, settings: Any
) -> None:
    settings.INSPECTION_RETENTION_DAYS = 30
    report(fleet, clock)
    old = run(clock)
    clock.advance(30 * 86400 + 1)
    report(fleet, clock)
    new = run(clock)
    assert list(InspectionRun.objects.values_list("pk", flat=True)) == [new.pk]
    assert not InspectionResult.objects.filter(run_id=old.pk).exists()
