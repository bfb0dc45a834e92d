"""The checks of a health inspection: what the portal holds of one node in, verdicts out.

Plain data, no database: `monitoring.inspections` gathers the facts (the node's record, its
agent's latest samples and node-level reading, the figures of the previous inspection) and
stores the findings. A check with nothing to judge (no fresh sample, no NVLink, no InfiniBand,
no driver reported) finds nothing: the heartbeat check already fails a node whose agent is silent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext as _

from monitoring.models import CheckStatus

OK, WARN, FAIL = CheckStatus.OK, CheckStatus.WARN, CheckStatus.FAIL

SILENT_WARN_S = 60
SILENT_FAIL_S = 300
"""An agent silent this long warns, then fails (the default "Agent silent" rule's levels); a
GPU whose latest sample is older than SILENT_FAIL_S counts as not seen."""
TEMP_WARN = 83.0
TEMP_FAIL = 90.0
"""°C, the default "GPU temperature" rule's levels (throttling starts near 87)."""
SBE_WARN_DELTA = 1000
"""Corrected ECC errors since the previous inspection that make a node worth watching."""

DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
SBE = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
TEMP = "DCGM_FI_DEV_GPU_TEMP"
THROTTLE_REASONS = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
NVLINK_UP = "PORTAL_NVLINK_LINKS_UP"
NVLINK_DOWN = "PORTAL_NVLINK_LINKS_DOWN"
IB_UP = "PORTAL_IB_PORTS_UP"
IB_DOWN = "PORTAL_IB_PORTS_DOWN"
IB_DOWN_PORTS = "ib_down"
# NVML clocks-event reasons. The hardware ones (slowdown, thermal, power brake) are a fault of
# the node's cooling or power; the software ones (power cap, thermal) its driver's caution.
HW_THROTTLE = 0x8 | 0x40 | 0x80
SW_THROTTLE = 0x4 | 0x20

# The driver version as NVIDIA's GPU Feature Discovery labels a node.
DRIVER_LABELS = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor")
DRIVER_REV_LABEL = "nvidia.com/cuda.driver.rev"


@dataclass(frozen=True)
class NodeFacts:
    """What the portal holds of one node, as a check reads it."""

    name: str
    ready: bool
    capacity: int
    allocatable: int
    has_agent: bool
    out_of_service: list[int] = field(default_factory=list)
    """Indices of GPUs the fault loop took out of service (unhealthy)."""
    samples: dict[int, dict[str, Any]] = field(default_factory=dict)
    """GPU index → its latest sample (`monitoring.hot`)."""
    host: dict[str, Any] = field(default_factory=dict)
    """The agent's latest node-level reading (`monitoring.hot.hosts`): driver, InfiniBand."""
    driver: str = ""
    """What the agent reports, else what GPU Feature Discovery's labels say; "" if neither."""
    previous: dict[str, float | None] = field(default_factory=dict)
    """Check → its figure in the previous inspection of this node."""


@dataclass(frozen=True)
class Finding:
    check: str
    status: CheckStatus
    figure: float | None
    detail: str


@dataclass(frozen=True)
class Fleet:
    """What a check compares a node against: the time, and the fleet's usual driver."""

    now: float
    driver: str = ""


def driver_version(labels: dict[str, str]) -> str:
    """ "550.54.15" from a node's GFD labels; "" where they do not say."""
    parts = [labels.get(name, "") for name in DRIVER_LABELS]
    if not all(parts):
        return ""
    rev = labels.get(DRIVER_REV_LABEL, "")
    return ".".join([*parts, rev] if rev else parts)


def fleet_driver(versions: Iterable[str]) -> str:
    """The version most nodes run (of a tie, the newest); the one a node should run."""
    counts = Counter(v for v in versions if v)
    if not counts:
        return ""
    return max(counts, key=lambda v: (counts[v], _version_key(v)))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def fresh(facts: NodeFacts, now: float) -> dict[int, dict[str, Any]]:
    """The samples recent enough to speak for their GPU now."""
    return {i: s for i, s in facts.samples.items() if now - s.get("at", 0) <= SILENT_FAIL_S}


def heartbeat(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    newest = max((s.get("at", 0) for s in facts.samples.values()), default=None)
    silent = None if newest is None else max(0.0, fleet.now - newest)
    if not facts.ready:
        return Finding("heartbeat", FAIL, silent, _("Kubernetes reports the node NotReady"))
    if silent is None:
        text = _("no sample from its agent in the last hour")
        if not facts.has_agent:
            text = _("no agent: the node was never given an agent token")
        return Finding("heartbeat", FAIL, None, text)
    detail = _("last sample %(seconds)d s ago") % {"seconds": silent}
    status = FAIL if silent > SILENT_FAIL_S else WARN if silent > SILENT_WARN_S else OK
    return Finding("heartbeat", status, silent, detail)


def gpus(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    """GPUs the agent reports and Kubernetes offers, against the node's capacity."""
    seen = len(fresh(facts, fleet.now))
    if seen and seen < facts.capacity:
        detail = _("its agent sees %(seen)d of %(capacity)d GPUs")
        return Finding("gpus", FAIL, seen, detail % {"seen": seen, "capacity": facts.capacity})
    if facts.allocatable < facts.capacity:
        detail = _("Kubernetes offers %(allocatable)d of %(capacity)d GPUs")
        values = {"allocatable": facts.allocatable, "capacity": facts.capacity}
        return Finding("gpus", FAIL, seen, detail % values)
    if facts.out_of_service:
        detail = _("out of service since a fault: %(gpus)s; return them from the incident")
        listed = ", ".join(f"gpu{i}" for i in facts.out_of_service)
        return Finding("gpus", WARN, seen, detail % {"gpus": listed})
    if not seen and facts.capacity:
        return None  # a silent agent: the heartbeat check fails the node
    detail = _("%(seen)d of %(capacity)d GPUs present") % {"seen": seen, "capacity": facts.capacity}
    return Finding("gpus", OK, seen, detail)


def _total(samples: dict[int, dict[str, Any]], name: str) -> float | None:
    values = [s[name] for s in samples.values() if isinstance(s.get(name), int | float)]
    return float(sum(values)) if values else None


def _delta(now: float, before: float | None) -> float | None:
    """Growth of a volatile counter since the last inspection; after a driver reload (a
    counter below its last figure) what it counted since."""
    if before is None:
        return None
    return now - before if now >= before else now


def ecc(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    """Uncorrected errors fail until the GPU is reset (the volatile counter clears)."""
    total = _total(fresh(facts, fleet.now), DBE)
    if total is None:
        return None
    delta = _delta(total, facts.previous.get("ecc"))
    detail = _("%(count)d uncorrected ECC errors") % {"count": total}
    if delta is not None:
        detail += " " + _("(+%(delta)d since the last inspection)") % {"delta": delta}
    return Finding("ecc", FAIL if total > 0 else OK, total, detail)


def ecc_corrected(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    total = _total(fresh(facts, fleet.now), SBE)
    if total is None:
        return None
    delta = _delta(total, facts.previous.get("ecc_corrected"))
    if delta is None:
        detail = _("%(count)d corrected ECC errors") % {"count": total}
        return Finding("ecc_corrected", OK, total, detail)
    detail = _("%(delta)d corrected ECC errors since the last inspection") % {"delta": delta}
    return Finding("ecc_corrected", WARN if delta >= SBE_WARN_DELTA else OK, total, detail)


def remap(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    samples = fresh(facts, fleet.now)
    known = [s for s in samples.values() if REMAP_PENDING in s or REMAP_FAILURE in s]
    if not known:
        return None
    failed = sorted(i for i, s in samples.items() if s.get(REMAP_FAILURE))
    pending = sorted(i for i, s in samples.items() if s.get(REMAP_PENDING))
    count = len(set(failed) | set(pending))
    if not count:
        return Finding("remap", OK, 0, _("no row remap pending or failed"))
    detail = _("row remap failed: %(failed)s; pending a reset: %(pending)s") % {
        "failed": _gpus(failed),
        "pending": _gpus(pending),
    }
    return Finding("remap", FAIL, count, detail)


def _gpus(indices: list[int]) -> str:
    return ", ".join(f"gpu{i}" for i in indices) or "-"


def temperature(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    temps = {i: s[TEMP] for i, s in fresh(facts, fleet.now).items() if s.get(TEMP) is not None}
    if not temps:
        return None
    index = max(temps, key=lambda i: temps[i])
    hottest = float(temps[index])
    detail = _("hottest: gpu%(index)d at %(temp)g °C") % {"index": index, "temp": hottest}
    status = FAIL if hottest >= TEMP_FAIL else WARN if hottest >= TEMP_WARN else OK
    return Finding("temperature", status, hottest, detail)


def throttling(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    reasons = {
        i: s[THROTTLE_REASONS]
        for i, s in fresh(facts, fleet.now).items()
        if isinstance(s.get(THROTTLE_REASONS), int)
    }
    if not reasons:
        return None
    hardware = sorted(i for i, r in reasons.items() if r & HW_THROTTLE)
    software = sorted(i for i, r in reasons.items() if r & SW_THROTTLE and i not in hardware)
    count = len(hardware) + len(software)
    if hardware:
        detail = _("held down by hardware (slowdown, thermal or power brake): %(gpus)s")
        return Finding("throttling", FAIL, count, detail % {"gpus": _gpus(hardware)})
    if software:
        detail = _("held down by the driver's power cap or thermal limit: %(gpus)s")
        return Finding("throttling", WARN, count, detail % {"gpus": _gpus(software)})
    return Finding("throttling", OK, 0, _("no GPU throttled"))


def nvlink(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    samples = fresh(facts, fleet.now)
    down = _total(samples, NVLINK_DOWN)
    if down is None:
        return None  # no NVLink on this node's GPUs (or an agent that cannot read it)
    if down:
        broken = sorted(i for i, s in samples.items() if s.get(NVLINK_DOWN))
        detail = _("%(count)d NVLink links down on %(gpus)s")
        return Finding("nvlink", FAIL, down, detail % {"count": down, "gpus": _gpus(broken)})
    up = _total(samples, NVLINK_UP) or 0
    return Finding("nvlink", OK, 0, _("all %(up)d NVLink links up") % {"up": up})


def infiniband(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    host = facts.host
    if not isinstance(host.get(IB_DOWN), int) or fleet.now - host.get("at", 0) > SILENT_FAIL_S:
        return None  # no InfiniBand on this node, or no fresh word of it
    down, up = host[IB_DOWN], host.get(IB_UP, 0)
    if down:
        detail = _("%(count)d of %(total)d InfiniBand ports down: %(ports)s")
        ports = ", ".join(host.get(IB_DOWN_PORTS) or ()) or "-"
        values = {"count": down, "total": down + up, "ports": ports}
        return Finding("infiniband", FAIL, down, detail % values)
    return Finding("infiniband", OK, 0, _("all %(up)d InfiniBand ports up") % {"up": up})


def driver(facts: NodeFacts, fleet: Fleet) -> Finding | None:
    if not facts.driver or not fleet.driver:
        return None
    if facts.driver != fleet.driver:
        detail = _("driver %(version)s; most of the fleet runs %(fleet)s")
        return Finding(
            "driver", FAIL, None, detail % {"version": facts.driver, "fleet": fleet.driver}
        )
    return Finding("driver", OK, None, _("driver %(version)s") % {"version": facts.driver})


Check = Callable[[NodeFacts, Fleet], Finding | None]
CHECKS: tuple[Check, ...] = (
    heartbeat,
    gpus,
    ecc,
    ecc_corrected,
    remap,
    temperature,
    throttling,
    nvlink,
    infiniband,
    driver,
)


def inspect_node(facts: NodeFacts, fleet: Fleet) -> list[Finding]:
    """Every check's finding on one node (the checks with nothing to judge left out)."""
    return [found for check in CHECKS if (found := check(facts, fleet)) is not None]
