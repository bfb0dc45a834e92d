"""kubesim's InfiniBand: each GPU node's sysfs tree as the kernel lays it out, counters that follow
the GPUs' work on the simulation's clock, and the ib-port-down and driver-drift faults."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesim import KubeSim
from kubesim.clock import ManualClock
from kubesim.faults import DRIFTED_DRIVER
from kubesim.ib import node_ports
from kubesim.nvml.gpu import DRIVER_VERSION

H100, A100 = "h100-a-1", "a100-c-1"


@pytest.fixture
def stopped() -> Iterator[tuple[KubeSim, ManualClock]]:
    """A simulation that is never served: calls run in the test's thread, on a manual clock."""
    clock = ManualClock(1_800_000_000.0)
    yield KubeSim(clock=clock), clock


def _port(root: str, device: str, path: str) -> str:
    return Path(root, device, "ports", "1", path).read_text().strip()


def test_each_gpu_node_gets_a_tree_as_the_kernel_lays_it_out(
    stopped: tuple[KubeSim, ManualClock], tmp_path: Path
) -> None:
    sim, _ = stopped
    fabric = sim.infiniband(tmp_path)
    fabric.refresh()
    root = fabric.root(H100)
    assert sorted(p.name for p in Path(root).iterdir()) == [f"mlx5_{i}" for i in range(4)]
    assert _port(root, "mlx5_0", "state") == "4: ACTIVE"
    assert _port(root, "mlx5_0", "phys_state") == "5: LinkUp"
    assert _port(root, "mlx5_0", "rate") == "400 Gb/sec (4X NDR)"
    assert _port(root, "mlx5_0", "link_layer") == "InfiniBand"
    counters = {p.name for p in Path(root, "mlx5_0", "ports", "1", "counters").iterdir()}
    assert counters == {
        "port_rcv_data",
        "port_xmit_data",
        "symbol_error",
        "link_downed",
        "port_rcv_errors",
    }
    assert _port(fabric.root(A100), "mlx5_3", "rate") == "200 Gb/sec (4X HDR)"
    assert node_ports("ada-lovelace", 0.0) == []  # an L40S server: no tree, nothing to read


def test_data_counters_follow_the_gpus_work(
    stopped: tuple[KubeSim, ManualClock], tmp_path: Path
) -> None:
    sim, clock = stopped
    fabric = sim.infiniband(tmp_path)
    sim.sim.gpus[H100].allocate("all-reduce", 8, 100.0)
    fabric.refresh()
    clock.advance(10)
    fabric.refresh()
    words = int(_port(fabric.root(H100), "mlx5_1", "counters/port_xmit_data"))
    # 400 Gb/s, 35 % of it at full load, for 10 s, in 4-byte words; utilisation wobbles 4 %.
    full = 400e9 / 8 * 0.35 * 10 / 4
    assert 0.95 * full <= words <= full
    assert int(_port(fabric.root(H100), "mlx5_1", "counters/port_rcv_data")) < words
    assert _port(fabric.root(A100), "mlx5_1", "counters/port_xmit_data") == "0"  # idle


def test_a_port_down_fault_flips_its_state_until_cleared(
    stopped: tuple[KubeSim, ManualClock], tmp_path: Path
) -> None:
    sim, clock = stopped
    fabric = sim.infiniband(tmp_path)
    sim.sim.gpus[H100].allocate("all-reduce", 8, 100.0)
    fault = sim.inject_fault("ib-port-down", H100, link=2)
    clock.advance(10)
    fabric.refresh()
    root = fabric.root(H100)
    assert (_port(root, "mlx5_2", "state"), _port(root, "mlx5_2", "phys_state")) == (
        "1: DOWN",
        "2: Polling",
    )
    assert _port(root, "mlx5_2", "counters/link_downed") == "1"
    assert _port(root, "mlx5_2", "counters/port_xmit_data") == "0"  # no traffic while down
    assert _port(root, "mlx5_1", "state") == "4: ACTIVE"
    assert [f.as_dict()["kind"] for f in sim.faults.active.values()] == ["ib-port-down"]
    sim.clear_faults(fault.id)
    fabric.refresh()
    assert _port(root, "mlx5_2", "state") == "4: ACTIVE"
    assert _port(root, "mlx5_2", "counters/link_downed") == "1"  # the kernel's count stays


def test_a_port_the_node_lacks_is_refused_by_name(stopped: tuple[KubeSim, ManualClock]) -> None:
    sim, _ = stopped
    with pytest.raises(ValueError, match="link: node 'h100-a-1' has 4 InfiniBand ports"):
        sim.inject_fault("ib-port-down", H100, link=4)
    assert sim.faults.active == {}


def test_driver_drift_changes_one_nodes_driver(stopped: tuple[KubeSim, ManualClock]) -> None:
    sim, _ = stopped
    sim.inject_fault("driver-drift", H100)
    drivers = {name: gpus.driver for name, gpus in sim.sim.gpus.items()}
    assert drivers[H100] == DRIFTED_DRIVER != DRIVER_VERSION
    assert {v for name, v in drivers.items() if name != H100} == {DRIVER_VERSION}
    sim.clear_faults(node=H100)
    assert sim.sim.gpus[H100].driver == DRIVER_VERSION
