"""The agent against kubesim's fake NVML, read through the real pynvml."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from agent import fields as f
from agent import ib
from agent.__main__ import main as agent_main
from agent.core import Agent
from agent.embedded import run_agents
from agent.outbox import Backoff
from agent.transport import TransportError
from kubesim import KubeSim
from kubesim.faults import DRIFTED_DRIVER
from tests.kubesim.conftest import wait_for

NODE = "h100-a-1"
OTHER = "a100-c-1"


class Recorder:
    """A portal that accepts everything, or refuses while `down`."""

    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []
        self.down = False

    def post(self, batch: dict[str, Any]) -> None:
        if self.down:
            raise TransportError("connection refused", retry=True)
        self.batches.append(json.loads(json.dumps(batch)))


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim(speed=40.0) as running:
        # Two GPUs busy at 80 %, as the device plugin would hand them to a pod.
        running.call(lambda: running.sim.gpus[NODE].allocate("busy-pod", 2, 80.0))
        yield running


@pytest.fixture
def agent(sim: KubeSim) -> Iterator[tuple[Agent, Recorder]]:
    recorder = Recorder()
    running = Agent(NODE, recorder, interval=5, library=sim.nvml_library(NODE))
    running.open()
    try:
        yield running, recorder
    finally:
        running.close()
        sim.clear_faults(node=NODE)


def test_it_reads_every_gpu_with_dcgm_field_names(agent: tuple[Agent, Recorder]) -> None:
    running, _ = agent
    gpus = running.sample_once()
    assert [g["index"] for g in gpus] == list(range(8))
    busy, idle = gpus[0], gpus[7]
    assert 70 <= busy[f.GPU_UTIL] <= 90 and idle[f.GPU_UTIL] == 0
    assert busy[f.FB_TOTAL] == 81559 and 81558 <= busy[f.FB_USED] + busy[f.FB_FREE] <= 81559
    assert busy[f.FB_USED] > 40000 and idle[f.FB_USED] == 2
    assert busy[f.GPU_TEMP] > idle[f.GPU_TEMP] >= 30
    assert busy[f.MEMORY_TEMP] > idle[f.MEMORY_TEMP] >= 30  # a field value (id 82)
    assert busy[f.POWER_LIMIT] == idle[f.POWER_LIMIT] == 700.0
    assert (busy[f.SM_CLOCK], busy[f.MEM_CLOCK]) == (1980, 2619) and idle[f.SM_CLOCK] == 345
    assert busy[f.POWER_USAGE] > 400 and idle[f.POWER_USAGE] == 70.0
    assert busy[f.TOTAL_ENERGY] > 0
    assert idle[f.THROTTLE_REASONS] == 1 and busy[f.THROTTLE_REASONS] == 0  # 1: GPU idle
    assert (busy[f.ECC_SBE], busy[f.ECC_DBE]) == (0, 0)
    assert (busy[f.REMAP_PENDING], busy[f.REMAP_FAILURE]) == (0, 0)
    assert (busy[f.NVLINK_UP], busy[f.NVLINK_DOWN]) == (18, 0)
    assert (busy[f.NVLINK_CRC], busy[f.NVLINK_REPLAY], busy[f.NVLINK_RECOVERY]) == (0, 0, 0)
    assert busy[f.PCIE_RX] > busy[f.PCIE_TX] > 0 and idle[f.PCIE_RX] == 0
    assert busy["uuid"].startswith("GPU-")


PROFILING = (
    f.GR_ENGINE_ACTIVE,
    f.SM_ACTIVE,
    f.SM_OCCUPANCY,
    f.TENSOR_ACTIVE,
    f.DRAM_ACTIVE,
    f.NVLINK_RX,
    f.NVLINK_TX,
)


def test_hopper_gpus_report_profiling_fields_that_follow_their_load(
    agent: tuple[Agent, Recorder],
) -> None:
    running, _ = agent
    first = running.sample_once()
    assert all(name not in g for g in first for name in PROFILING)  # a rate needs two samples
    gpus = running.sample_once()
    busy, idle = gpus[0], gpus[7]
    assert {name: idle[name] for name in PROFILING} == dict.fromkeys(PROFILING, 0)
    # 80 % utilised (±4): GPM's SM activity a little below, occupancy and DRAM well below.
    assert 0.68 <= busy[f.SM_ACTIVE] <= 0.8 and busy[f.GR_ENGINE_ACTIVE] > busy[f.SM_ACTIVE]
    assert busy[f.SM_ACTIVE] > busy[f.TENSOR_ACTIVE] > busy[f.SM_OCCUPANCY] > busy[f.DRAM_ACTIVE]
    # NVLink traffic in bytes/s: 120,000 MiB/s at full load, so 76-84 % of it here.
    for name in (f.NVLINK_RX, f.NVLINK_TX):
        assert 0.76 * 120_000 * 2**20 <= busy[name] <= 0.84 * 120_000 * 2**20


def test_fields_a_gpu_does_not_offer_are_absent(sim: KubeSim) -> None:
    gpus_of = sim.sim.gpus[OTHER]
    sim.call(lambda: gpus_of.allocate("busy-a100", 1, 80.0))
    running = Agent(OTHER, Recorder(), interval=5, library=sim.nvml_library(OTHER))
    running.open()
    try:
        for _ in range(3):
            gpus = running.sample_once()
    finally:
        running.close()
        sim.call(lambda: gpus_of.release("busy-a100"))
    assert gpus[0][f.GPU_UTIL] > 50  # busy, yet an A100 has no GPM: no profiling field
    assert all(name not in g for g in gpus for name in PROFILING)
    assert all(f.XID_ERRORS not in g for g in gpus)


def test_faults_show_in_the_fields(sim: KubeSim, agent: tuple[Agent, Recorder]) -> None:
    running, _ = agent
    sim.inject_fault("thermal", NODE, gpu=3)
    sim.inject_fault("thermal", NODE, gpu=1)
    sim.inject_fault("nvlink-down", NODE, gpu=3, link=5)
    sim.inject_fault("row-remap-pending", NODE, gpu=3)
    sim.inject_fault("gpu-lost", NODE, gpu=6)
    sim.inject_fault("nvlink-errors", NODE, gpu=0)
    gpus = running.sample_once()
    assert gpus[3][f.THROTTLE_REASONS] & 0x40 and gpus[3][f.GPU_TEMP] >= 87
    assert gpus[3][f.MEMORY_TEMP] == 90  # idle, overheating
    assert gpus[1][f.SM_CLOCK] == 1188 and gpus[1][f.MEMORY_TEMP] > 120  # busy, throttled
    assert (gpus[0][f.NVLINK_CRC], gpus[0][f.NVLINK_REPLAY], gpus[0][f.NVLINK_RECOVERY]) == (
        100,
        100,
        10,
    )
    assert (gpus[3][f.NVLINK_UP], gpus[3][f.NVLINK_DOWN]) == (17, 1)
    assert gpus[3][f.REMAP_PENDING] == 1
    assert set(gpus[6]) == {"index", "at"}  # off the bus: no readings, and no error


def test_xid_is_posted_at_once_through_the_event_wait(sim: KubeSim) -> None:
    recorder = Recorder()
    running = Agent(NODE, recorder, interval=60, library=sim.nvml_library(NODE))
    stop = threading.Event()
    thread = threading.Thread(target=running.run, args=(stop,))
    thread.start()
    try:
        wait_for(lambda: recorder.batches, what="the first sample")
        sim.inject_fault("xid", NODE, gpu=2, xid=31)
        batch = wait_for(lambda: next((b for b in recorder.batches if b["xids"]), None), 5, "xid")
        assert [(x["index"], x["xid"]) for x in batch["xids"]] == [(2, 31)]
    finally:
        stop.set()
        thread.join(timeout=10)
        sim.clear_faults(node=NODE)
    assert len([b for b in recorder.batches if b["gpus"]]) == 1  # the Xid did not wait 60 s


def test_it_buffers_while_the_portal_is_down_and_delivers_everything_after(sim: KubeSim) -> None:
    now = [1000.0]
    recorder = Recorder()
    running = Agent(
        NODE,
        recorder,
        interval=5,
        library=sim.nvml_library(NODE),
        clock=lambda: now[0],
        backoff=Backoff(initial=1, maximum=60),
    )
    running.open()
    try:
        recorder.down = True
        for _ in range(10 * 60 // 5):  # ten minutes of outage
            running.sample_once()
            running.flush()
            now[0] += 5
        assert recorder.batches == [] and running.outbox.dropped == 0
        recorder.down = False
        now[0] += 60  # past any backoff
        delivered = running.flush()
    finally:
        running.close()
    times = [g["at"] for b in recorder.batches for g in b["gpus"] if g["index"] == 0]
    assert delivered == 120 * 8
    assert times == [1000.0 + 5 * i for i in range(120)]  # every sample, in order
    assert running.outbox.pending() == 0


def test_the_buffer_is_bounded_and_drops_the_oldest(sim: KubeSim) -> None:
    recorder = Recorder()
    recorder.down = True
    running = Agent(NODE, recorder, interval=1800, library=sim.nvml_library(NODE))
    running.open()
    try:
        for _ in range(3):  # the buffer holds an hour: two batches at 30 min
            running.sample_once()
    finally:
        running.close()
    assert running.outbox.pending() == 2 and running.outbox.dropped == 8


class _Portal(BaseHTTPRequestHandler):
    received: list[tuple[str, dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.headers["Authorization"], body))
        self.send_response(202)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_embedded_agents_read_their_own_node_and_post_with_its_token(
    sim: KubeSim, tmp_path: Path
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Portal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop = threading.Event()
    libraries = {NODE: sim.nvml_library(NODE), OTHER: sim.nvml_library(OTHER)}
    fabric = sim.infiniband(tmp_path)
    fabric.refresh()
    url = f"http://127.0.0.1:{server.server_port}"
    threads = run_agents(
        libraries,
        url,
        lambda node: f"token-of-{node}",
        stop,
        interval=0.2,
        ib_roots_by_node={name: fabric.root(name) for name in libraries},
    )
    try:
        wait_for(lambda: {b["node"] for _, b in _Portal.received} == {NODE, OTHER}, what="posts")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        server.shutdown()
    for auth, body in _Portal.received:
        assert auth == f"Bearer token-of-{body['node']}"
        busy = body["node"] == NODE
        assert (body["gpus"][0][f.GPU_UTIL] > 50) is busy  # each thread read its own node
        assert body["host"][ib.RATE] == (400 if busy else 200)  # and its own InfiniBand tree


def _posted_host(running: Agent, recorder: Recorder) -> dict[str, Any]:
    running.sample_once()
    running.flush()
    host: dict[str, Any] = recorder.batches[-1]["host"]
    return host


def test_the_batch_carries_the_nodes_driver_and_a_drift_shows(
    sim: KubeSim, agent: tuple[Agent, Recorder], tmp_path: Path
) -> None:
    running, recorder = agent
    running.ib_root = str(tmp_path / "absent")  # a node without InfiniBand
    host = _posted_host(running, recorder)
    assert host == {"at": host["at"], "driver": "570.86.15"}  # and no InfiniBand field at all
    sim.inject_fault("driver-drift", NODE)
    assert _posted_host(running, recorder)["driver"] == DRIFTED_DRIVER
    sim.clear_faults(node=NODE)
    assert _posted_host(running, recorder)["driver"] == "570.86.15"


def test_infiniband_ports_are_read_from_the_nodes_sysfs_tree(
    sim: KubeSim, agent: tuple[Agent, Recorder], tmp_path: Path
) -> None:
    running, recorder = agent
    fabric = sim.infiniband(tmp_path)
    fabric.refresh()
    running.ib_root = fabric.root(NODE)
    host = _posted_host(running, recorder)
    assert (host[ib.PORTS_UP], host[ib.PORTS_DOWN], host[ib.DOWN_PORTS]) == (4, 0, [])
    assert host[ib.RATE] == 400.0 and host[ib.LINK_DOWNED] == 0
    sent = host[ib.XMIT_BYTES]
    assert sent > 0 and sent % 4 == 0  # busy GPUs move data; sysfs counts 4-byte words
    sim.inject_fault("ib-port-down", NODE, link=2)
    fabric.refresh()
    host = _posted_host(running, recorder)
    assert (host[ib.PORTS_UP], host[ib.PORTS_DOWN], host[ib.DOWN_PORTS]) == (3, 1, ["mlx5_2/1"])
    assert host[ib.LINK_DOWNED] == 1 and host[ib.SYMBOL_ERRORS] > 0
    assert host[ib.XMIT_BYTES] > sent


def test_the_command_line_points_the_agent_at_an_infiniband_root() -> None:
    parser_args = ["--portal", "http://portal", "--node", NODE, "--token-file", "/dev/null"]
    seen: dict[str, Any] = {}

    class Stub:
        def __init__(self, node: str, transport: object, **options: Any) -> None:
            seen.update(options)

        def run(self, stop: threading.Event) -> None:
            pass

    with mock.patch("agent.__main__.Agent", Stub), mock.patch("signal.signal"):
        agent_main([*parser_args, "--ib-root", "/host/sys/class/infiniband"])
        assert seen["ib_root"] == "/host/sys/class/infiniband"
        agent_main(parser_args)
        assert seen["ib_root"] == "/sys/class/infiniband"


def test_the_backoff_doubles_spreads_and_never_passes_its_maximum() -> None:
    backoff = Backoff(initial=1, maximum=60)
    delays = [backoff.failed() for _ in range(200)]
    assert 0.8 <= delays[0] <= 1 and 1.6 <= delays[1] <= 2  # doubling, less a random fifth
    assert max(delays) <= 60 and min(delays[10:]) >= 48
    assert len(set(delays[10:])) > 1  # agents at the cap still do not return together
    backoff.succeeded()
    assert backoff.failed() <= 1
