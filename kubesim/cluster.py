"""The cluster file: node pools with GPU products, sizes and topology labels, and timing knobs.

```yaml
tolerationSeconds: 30        # grace before pods leave a NotReady node (DefaultTolerationSeconds)
heartbeatSeconds: 60         # how often Ready's lastHeartbeatTime moves
containerStartSeconds: 1.0   # from a pod's binding to its container running (pull and start)
pools:
  - name: h100               # nodes are named <name>-<i>
    count: 4
    gpuProduct: NVIDIA-H100-80GB-HBM3   # a known product, or give gpuMemoryMiB/gpuPowerWatts
    gpusPerNode: 8
    cpu: "96"
    memory: 1Ti
    rack: rack-a             # -> topology.kubernetes.io/zone
    nvlinkDomain: per-node   # -> nvidia.com/gpu.clique; or a fixed name shared by the pool
    labels: {}
    taints: []
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class GpuProduct:
    """What NVML reports for a product: marketing name, framebuffer, power limit."""

    label: str
    name: str
    memory_mib: int
    power_watts: int
    family: str


PRODUCTS = {
    p.label: p
    for p in (
        GpuProduct("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 81559, 700, "hopper"),
        GpuProduct("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 81920, 400, "ampere"),
        GpuProduct("NVIDIA-A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", 40960, 400, "ampere"),
        GpuProduct("NVIDIA-H200", "NVIDIA H200", 143771, 700, "hopper"),
        GpuProduct("NVIDIA-L40S", "NVIDIA L40S", 46068, 350, "ada-lovelace"),
    )
}


@dataclass(frozen=True)
class Pool:
    """A group of identical nodes."""

    name: str
    count: int
    gpu: GpuProduct | None
    gpus_per_node: int
    cpu: str
    memory: str
    rack: str
    nvlink_domain: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ClusterSpec:
    """The whole simulated cluster."""

    pools: tuple[Pool, ...]
    toleration_seconds: int = 30
    heartbeat_seconds: int = 60
    container_start_seconds: float = 1.0


def _product(raw: dict[str, Any]) -> GpuProduct | None:
    label = raw.get("gpuProduct")
    if not label:
        return None
    if label in PRODUCTS and "gpuMemoryMiB" not in raw:
        return PRODUCTS[label]
    return GpuProduct(
        label,
        str(raw.get("gpuName", label.replace("-", " "))),
        int(raw.get("gpuMemoryMiB", 81920)),
        int(raw.get("gpuPowerWatts", 400)),
        str(raw.get("gpuFamily", "unknown")),
    )


def _pool(raw: dict[str, Any]) -> Pool:
    missing = [k for k in ("name", "count") if k not in raw]
    if missing:
        raise ValueError(f"pool {raw.get('name', '?')}: missing {', '.join(missing)}")
    gpu = _product(raw)
    return Pool(
        name=str(raw["name"]),
        count=int(raw["count"]),
        gpu=gpu,
        gpus_per_node=int(raw.get("gpusPerNode", 8 if gpu else 0)),
        cpu=str(raw.get("cpu", "96")),
        memory=str(raw.get("memory", "1Ti")),
        rack=str(raw.get("rack", "")),
        nvlink_domain=str(raw.get("nvlinkDomain", "per-node")),
        labels={str(k): str(v) for k, v in (raw.get("labels") or {}).items()},
        taints=tuple(raw.get("taints") or ()),
    )


def parse_cluster(data: dict[str, Any]) -> ClusterSpec:
    pools = tuple(_pool(p) for p in data.get("pools") or [])
    if not pools:
        raise ValueError("cluster file: pools: at least one pool is required")
    start = float(data.get("containerStartSeconds", 1.0))
    if not 0 <= start <= 3600:
        raise ValueError(f"cluster file: containerStartSeconds: {start} is not within 0..3600")
    return ClusterSpec(
        pools,
        int(data.get("tolerationSeconds", 30)),
        int(data.get("heartbeatSeconds", 60)),
        start,
    )


def load_cluster(path: str | Path) -> ClusterSpec:
    return parse_cluster(yaml.safe_load(Path(path).read_text()) or {})


def default_cluster() -> ClusterSpec:
    """Two racks of four 8×H100 nodes and a rack of four 8×A100 nodes."""
    h100, a100 = PRODUCTS["NVIDIA-H100-80GB-HBM3"], PRODUCTS["NVIDIA-A100-SXM4-80GB"]
    return ClusterSpec(
        (
            Pool("h100-a", 4, h100, 8, "96", "1Ti", "rack-a", "per-node"),
            Pool("h100-b", 4, h100, 8, "96", "1Ti", "rack-b", "per-node"),
            Pool("a100-c", 4, a100, 8, "64", "512Gi", "rack-c", "per-node"),
        )
    )
