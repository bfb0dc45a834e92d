"""The node-level reading (driver, InfiniBand) as the portal checks it: what the agent sends
passes, what no agent could send is refused with the field and the limit named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent import ib
from agent.outbox import Outbox
from monitoring.schema import IB_PORT_LENGTH, MAX_IB_PORTS, NODE_METRICS
from monitoring.validation import HOST_TEXTS, _entry_bytes, validate_batch

NOW = 1_800_000_000.0


def _batch(host: Any) -> dict[str, Any]:
    return {"node": "n1", "interval": 5, "gpus": [{"index": 0, "at": NOW}], "host": host}


def test_the_portal_knows_every_node_level_field_the_agent_sends() -> None:
    sent = {v for k, v in vars(ib).items() if isinstance(v, str) and v.startswith("PORTAL_IB_")}
    assert sent == set(NODE_METRICS)


def test_what_the_agent_reads_of_a_node_passes(tmp_path: Path) -> None:
    port = tmp_path / "mlx5_0" / "ports" / "1"
    (port / "counters").mkdir(parents=True)
    for name, text in {"state": "1: DOWN", "rate": "200 Gb/sec (4X HDR)"}.items():
        (port / name).write_text(text + "\n")
    (port / "counters" / "link_downed").write_text("3\n")
    host = {"at": NOW, "driver": "570.86.15", **ib.ib_fields(ib.read_ports(tmp_path))}
    assert host[ib.DOWN_PORTS] == ["mlx5_0/1"] and ib.RATE not in host  # no port active
    batch, errors = validate_batch(_batch(host), NOW)
    assert errors == {} and batch is not None and batch.host == host


def test_ethernet_ports_and_a_missing_tree_give_no_infiniband_fields(tmp_path: Path) -> None:
    port = tmp_path / "mlx5_bond_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("1: DOWN\n")  # an unused RoCE port: down by design
    (port / "link_layer").write_text("Ethernet\n")
    assert ib.ib_fields(ib.read_ports(tmp_path)) == {}
    assert ib.read_ports(tmp_path / "absent") == []


@pytest.mark.parametrize(
    ("host", "field", "says"),
    [
        ({"at": NOW, "driver": "5" * 81}, "host.driver", "at most 80 characters"),
        ({"at": NOW, "driver": "570.86.15\n<b>"}, "host.driver", "driver version"),
        ({"at": NOW, "ib_down": ["mlx5_0/1"] * 65}, "host.ib_down", "at most 64 port"),
        ({"at": NOW, "ib_down": ["mlx5_0"]}, "host.ib_down", '"device/port"'),
        ({"at": NOW, "PORTAL_IB_PORTS_DOWN": 65}, "host.PORTAL_IB_PORTS_DOWN", "between 0 and 64"),
        ({"at": NOW, "PORTAL_IB_PORTS_UP": 1.5}, "host.PORTAL_IB_PORTS_UP", "an integer"),
        ({"at": NOW, "hostname": "x"}, "host.hostname", "unknown field"),
        ({"driver": "570.86.15"}, "host.at", "required"),
        ({"at": NOW - 7 * 3600}, "host.at", "within the last 6 hours"),
        ([], "host", "an object"),
    ],
)
def test_a_bad_node_reading_is_refused_naming_the_field(host: Any, field: str, says: str) -> None:
    batch, errors = validate_batch(_batch(host), NOW)
    assert batch is None and list(errors) == [field]
    assert says in errors[field][0]


def test_the_body_limit_leaves_room_for_the_largest_valid_reading() -> None:
    ports = [f"{'m' * (IB_PORT_LENGTH - 4)}/{i:03d}" for i in range(MAX_IB_PORTS)]
    host: dict[str, Any] = {"at": NOW, "driver": "9" * 80, "ib_down": ports}
    for name, bound in NODE_METRICS.items():
        host[name] = int(bound.high) if bound.integer else float(bound.high)
    assert validate_batch(_batch(host), NOW)[1] == {}
    assert len(json.dumps(host)) <= _entry_bytes(NODE_METRICS, HOST_TEXTS)


def test_only_the_newest_node_reading_goes_out_and_only_once() -> None:
    posted: list[dict[str, Any]] = []
    outbox = Outbox("n1", 5, max_batches=10)
    for second in range(3):
        outbox.add_samples([{"index": 0, "at": NOW + second}])
        outbox.set_node_reading({"at": NOW + second, "driver": "570.86.15"})
    outbox.send(_Transport(posted))
    outbox.add_samples([{"index": 0, "at": NOW + 3}])
    outbox.send(_Transport(posted))
    assert [b.get("host", {}).get("at") for b in posted] == [NOW + 2, None]


class _Transport:
    def __init__(self, posted: list[dict[str, Any]]) -> None:
        self.posted = posted

    def post(self, batch: dict[str, Any]) -> None:
        self.posted.append(batch)
