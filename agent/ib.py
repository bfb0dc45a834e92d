"""The node's InfiniBand ports, read from sysfs as `ibstat` reads them: node-level fields.

Each RDMA device is a directory under /sys/class/infiniband with `ports/<n>/state` ("4: ACTIVE"),
`phys_state` ("5: LinkUp"), `rate` ("400 Gb/sec (4X NDR)"), `link_layer` and the port's
`counters/`. Only InfiniBand ports count (a RoCE port's link layer is Ethernet, and a host's
unused Ethernet ports are down by design). A node without the directory has no InfiniBand and
reports none of these fields. DCGM has no InfiniBand fields, hence the PORTAL_IB_ prefix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_ROOT = "/sys/class/infiniband"

PORTS_UP = "PORTAL_IB_PORTS_UP"  # count of ACTIVE ports
PORTS_DOWN = "PORTAL_IB_PORTS_DOWN"  # count of ports in any other state
RATE = "PORTAL_IB_RATE_GBPS"  # the slowest active port, Gb/s: what a ring collective gets
RCV_BYTES = "PORTAL_IB_RCV_BYTES"  # all ports, since the driver loaded
XMIT_BYTES = "PORTAL_IB_XMIT_BYTES"  # all ports
SYMBOL_ERRORS = "PORTAL_IB_SYMBOL_ERRORS"  # all ports
LINK_DOWNED = "PORTAL_IB_LINK_DOWNED"  # all ports: times a link went down
RCV_ERRORS = "PORTAL_IB_RCV_ERRORS"  # all ports
DOWN_PORTS = "ib_down"  # the ports not ACTIVE, "device/port"

ACTIVE = 4
WORD_BYTES = 4  # port_xmit_data and port_rcv_data count 4-octet words
COUNTERS = {
    "port_rcv_data": (RCV_BYTES, WORD_BYTES),
    "port_xmit_data": (XMIT_BYTES, WORD_BYTES),
    "symbol_error": (SYMBOL_ERRORS, 1),
    "link_downed": (LINK_DOWNED, 1),
    "port_rcv_errors": (RCV_ERRORS, 1),
}
"""sysfs counter → (field, bytes per unit)."""


@dataclass
class Port:
    """One port as sysfs shows it."""

    name: str
    state: int
    rate_gbps: float | None
    counters: dict[str, int] = field(default_factory=dict)


def _text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _code(text: str | None) -> int | None:
    """4 from "4: ACTIVE"."""
    head = (text or "").partition(":")[0].strip()
    return int(head) if head.isdigit() else None


def _rate(text: str | None) -> float | None:
    """400.0 from "400 Gb/sec (4X NDR)"."""
    try:
        return float((text or "").split()[0])
    except (IndexError, ValueError):
        return None


def _port(device: str, directory: Path) -> Port | None:
    if (_text(directory / "link_layer") or "InfiniBand") != "InfiniBand":
        return None
    state = _code(_text(directory / "state"))
    if state is None:
        return None
    counters = {}
    for name in COUNTERS:
        value = _text(directory / "counters" / name)
        if value is not None and value.isdigit():
            counters[name] = int(value)
    rate = _rate(_text(directory / "rate"))
    return Port(f"{device}/{directory.name}", state, rate, counters)


def _listing(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def read_ports(root: str | Path = DEFAULT_ROOT) -> list[Port]:
    """Every InfiniBand port under `root`; none where there is no such directory."""
    ports = []
    for device in _listing(Path(root)):
        for number in _listing(Path(root, device, "ports")):
            port = _port(device, Path(root, device, "ports", number))
            if port is not None:
                ports.append(port)
    return ports


def ib_fields(ports: list[Port]) -> dict[str, Any]:
    """The node-level fields of these ports (none without ports)."""
    if not ports:
        return {}
    up = [p for p in ports if p.state == ACTIVE]
    found: dict[str, Any] = {
        PORTS_UP: len(up),
        PORTS_DOWN: len(ports) - len(up),
        DOWN_PORTS: [p.name for p in ports if p.state != ACTIVE],
    }
    rates = [p.rate_gbps for p in up if p.rate_gbps is not None]
    if rates:
        found[RATE] = min(rates)
    for name, (field_name, unit) in COUNTERS.items():
        values = [p.counters[name] for p in ports if name in p.counters]
        if values:
            found[field_name] = sum(values) * unit
    return found
