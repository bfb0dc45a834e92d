"""Simulated InfiniBand ports, and the sysfs tree an agent reads them from.

A GPU node carries a few HCA ports (one port per ConnectX device, named as mlx5 names them).
Their state lives beside the node's GPUs (`NodeGpus.ib_ports`), where faults flip it. `IbSysfs`
writes each node's `/sys/class/infiniband` into a directory of its own, laid out as the kernel
lays it out (`<device>/ports/<n>/{state,phys_state,rate,link_layer}` and `.../counters/`), and
rewrites what changed every REFRESH_S, so an agent pointed at that tree reads ports as it does
on a real node. Data counters follow the node's GPU use: collectives move more as GPUs work.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kubesim.nvml.gpu import NodeGpus

PORTS_PER_NODE = 4
LINKS = {"hopper": (400, "4X NDR"), "ampere": (200, "4X HDR")}
"""Per GPU family, its HCAs' rate in Gb/s and width: ConnectX-7 beside Hopper, ConnectX-6
beside Ampere. Other families (an L40S server) have no InfiniBand here."""
TRAFFIC_SHARE = 0.35
"""Of the line rate, what a port carries while the node's GPUs are fully busy."""
WORD_BYTES = 4  # port_xmit_data and port_rcv_data count 4-octet words
REFRESH_S = 1.0


@dataclass
class IbPort:
    """One HCA port: its link and the counters the kernel shows under `counters/`."""

    device: str
    port: int
    rate_gbps: int
    width: str
    down: bool = False
    link_downed: int = 0
    symbol_errors: int = 0
    rcv_errors: int = 0
    xmit_words: float = 0.0
    rcv_words: float = 0.0
    integrated_at: float = 0.0

    def integrate(self, now: float, busy_share: float) -> None:
        """Count the traffic since the last call (none while the link is down)."""
        if now <= self.integrated_at:
            return
        if not self.down:
            words = self.rate_gbps * 1e9 / 8 * TRAFFIC_SHARE * busy_share / WORD_BYTES
            self.xmit_words += words * (now - self.integrated_at)
            self.rcv_words += words * 0.98 * (now - self.integrated_at)
        self.integrated_at = now

    def set_down(self, down: bool) -> None:
        """A cable pulled or a switch port lost: the link goes, the kernel counts it once."""
        if down and not self.down:
            self.link_downed += 1
            self.symbol_errors += 12  # the bit errors of a link going bad before it drops
        self.down = down

    def files(self) -> dict[str, str]:
        """This port's files, by path below `ports/<n>/`, as the kernel writes them."""
        return {
            "state": "1: DOWN" if self.down else "4: ACTIVE",
            "phys_state": "2: Polling" if self.down else "5: LinkUp",
            "rate": f"{self.rate_gbps} Gb/sec ({self.width})",
            "link_layer": "InfiniBand",
            "counters/port_xmit_data": str(int(self.xmit_words)),
            "counters/port_rcv_data": str(int(self.rcv_words)),
            "counters/symbol_error": str(self.symbol_errors),
            "counters/link_downed": str(self.link_downed),
            "counters/port_rcv_errors": str(self.rcv_errors),
        }


def node_ports(family: str, now: float) -> list[IbPort]:
    """The ports of a node whose GPUs are of `family` (none where that family has no IB)."""
    if family not in LINKS:
        return []
    rate, width = LINKS[family]
    return [IbPort(f"mlx5_{i}", 1, rate, width, integrated_at=now) for i in range(PORTS_PER_NODE)]


def set_port_down(gpus: NodeGpus, index: int, down: bool) -> None:
    """Take port `index` of the node down (or bring it back), its traffic counted up to now."""
    if not 0 <= index < len(gpus.ib_ports):
        raise ValueError(f"link: node {gpus.node!r} has {len(gpus.ib_ports)} InfiniBand ports")
    with gpus.lock:
        now = gpus.clock.now()
        port = gpus.ib_ports[index]
        port.integrate(now, gpus.busy_share(now))
        port.set_down(down)


class IbSysfs:
    """Every node's `/sys/class/infiniband`, each under `directory/<node>`."""

    def __init__(self, nodes: Mapping[str, NodeGpus], directory: str | Path) -> None:
        self._nodes = nodes
        self._directory = Path(directory)
        self._written: dict[Path, str] = {}

    def root(self, node: str) -> str:
        """Where the agent of `node` finds its tree; absent for a node without ports."""
        return str(self._directory / node)

    def refresh(self) -> None:
        """Bring every tree up to the simulation's state now (only changed files written)."""
        for name, gpus in self._nodes.items():
            with gpus.lock:
                now = gpus.clock.now()
                share = gpus.busy_share(now)
                for port in gpus.ib_ports:
                    port.integrate(now, share)
                files = {
                    Path(self.root(name), port.device, "ports", str(port.port), path): text
                    for port in gpus.ib_ports
                    for path, text in port.files().items()
                }
            for path, text in files.items():
                if self._written.get(path) != text:
                    _write(path, text)
                    self._written[path] = text

    def start(self, stop: threading.Event) -> threading.Thread:
        """Write the trees now, then keep them current in a thread until `stop` is set."""
        self.refresh()

        def run() -> None:
            while not stop.wait(REFRESH_S):
                self.refresh()

        thread = threading.Thread(target=run, name="kubesim-infiniband", daemon=True)
        thread.start()
        return thread


def _write(path: Path, text: str) -> None:
    """Replace the file whole, so a reader never sees it half written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(text + "\n")
    os.replace(partial, path)
