"""Fault injection: what breaks on a real GPU node, and how it shows through NVML and the API.

| kind              | effect                                                                  |
|-------------------|-------------------------------------------------------------------------|
| xid               | an Xid event (`xid` code) on the GPU's event sets                        |
| gpu-lost          | Xid 79; NVML calls on the GPU return GPU_IS_LOST; allocatable GPUs drop |
| ecc-dbe           | uncorrected volatile ECC count +1 and Xid 48                            |
| row-remap-pending | nvmlDeviceGetRemappedRows reports a pending remap                        |
| row-remap-failed  | ... and a failed one                                                    |
| thermal           | +55 °C, clocks event reasons SW/HW thermal slowdown                     |
| nvlink-down       | NVLink `link` inactive, Xid 74                                          |
| nvlink-errors     | 100 more CRC flit errors (and replays) on the GPU's links, no Xid        |
| node-notready     | the node goes NotReady (see nodelifecycle)                              |
| driver-drift      | the node's NVML reports an older driver (DRIFTED_DRIVER) than the fleet  |
| ib-port-down      | InfiniBand port `link` (0-based) DOWN/Polling, its link_downed +1       |
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any

from kubesim.ib import set_port_down
from kubesim.nvml.gpu import DRIVER_VERSION, NodeGpus, SimGpu
from kubesim.resources import NODE
from kubesim.sim import Simulation

KINDS = (
    "xid",
    "gpu-lost",
    "ecc-dbe",
    "row-remap-pending",
    "row-remap-failed",
    "thermal",
    "nvlink-down",
    "nvlink-errors",
    "node-notready",
    "driver-drift",
    "ib-port-down",
)
XID_FOR = {"gpu-lost": 79, "ecc-dbe": 48, "nvlink-down": 74}
NODE_HARDWARE = frozenset({"driver-drift", "ib-port-down"})
"""Faults of the node's driver or fabric rather than of one GPU."""
DRIFTED_DRIVER = "550.54.15"
"""What a node left behind by a driver roll-out runs."""


@dataclass
class Fault:
    """One injected fault, as listed by GET /kubesim/v1/faults."""

    id: int
    kind: str
    node: str
    gpu: int
    xid: int
    link: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class FaultInjector:
    """Applies and clears faults on a simulation (on its loop thread)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.active: dict[int, Fault] = {}
        self._ids = itertools.count(1)

    def _gpu(self, node: str, index: int) -> tuple[NodeGpus, SimGpu]:
        gpus = self.sim.gpus.get(node)
        if gpus is None or not 0 <= index < len(gpus.gpus):
            raise ValueError(f"gpu: node {node!r} has no GPU {index}")
        return gpus, gpus.gpus[index]

    def inject(self, kind: str, node: str, gpu: int = 0, xid: int = 0, link: int = 0) -> Fault:
        if kind not in KINDS:
            raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
        if self.sim.store.get(NODE.key, "", node) is None:
            raise ValueError(f"node: {node!r} does not exist")
        if kind == "xid" and xid <= 0:
            raise ValueError("xid: an Xid code (e.g. 13, 31, 43, 63, 94) is required")
        fault = Fault(next(self._ids), kind, node, gpu, xid or XID_FOR.get(kind, 0), link)
        if kind == "node-notready":
            self.sim.lifecycle.set_not_ready(node)
        elif kind in NODE_HARDWARE:
            self._apply_node(fault, on=True)
        else:
            self._apply_gpu(fault, on=True)
        if kind != "xid":
            self.active[fault.id] = fault
        return fault

    def _apply_gpu(self, fault: Fault, on: bool) -> None:
        gpus, gpu = self._gpu(fault.node, fault.gpu)
        with gpus.lock:
            faults = gpu.faults
            if fault.kind == "gpu-lost":
                faults.lost = on
            elif fault.kind == "ecc-dbe":
                faults.ecc_uncorrected = faults.ecc_uncorrected + 1 if on else 0
            elif fault.kind == "row-remap-pending":
                faults.remap_pending = on
            elif fault.kind == "row-remap-failed":
                faults.remap_failed = on
            elif fault.kind == "thermal":
                faults.thermal = on
            elif fault.kind == "nvlink-down":
                (faults.nvlink_down.add if on else faults.nvlink_down.discard)(fault.link)
            elif fault.kind == "nvlink-errors":
                faults.nvlink_crc_errors = faults.nvlink_crc_errors + 100 if on else 0
        if on and fault.xid:
            gpus.post_xid(fault.gpu, fault.xid)
        if fault.kind == "gpu-lost":
            self._sync_allocatable(fault.node, gpus)

    def _apply_node(self, fault: Fault, on: bool) -> None:
        gpus = self.sim.gpus.get(fault.node)
        if gpus is None:
            raise ValueError(f"node: {fault.node!r} has no GPUs")
        if fault.kind == "ib-port-down":
            set_port_down(gpus, fault.link, on)
        else:
            with gpus.lock:
                gpus.driver = DRIFTED_DRIVER if on else DRIVER_VERSION

    def _sync_allocatable(self, node: str, gpus: NodeGpus) -> None:
        stored = self.sim.store.get(NODE.key, "", node)
        if stored is None:
            return
        obj = stored.thaw("status")
        obj["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus.healthy_count())
        self.sim.api.commit(NODE, stored, obj, "*")

    def clear(self, fault_id: int | None = None, node: str | None = None) -> list[Fault]:
        """Clear one fault by id, every fault of a node, or (neither given) all faults."""
        chosen = [
            f
            for f in self.active.values()
            if (fault_id is None or f.id == fault_id) and (node is None or f.node == node)
        ]
        for fault in chosen:
            del self.active[fault.id]
            if fault.kind == "node-notready":
                self.sim.lifecycle.set_ready(fault.node)
            elif fault.kind in NODE_HARDWARE:
                self._apply_node(fault, on=False)
            else:
                self._apply_gpu(fault, on=False)
        return chosen
