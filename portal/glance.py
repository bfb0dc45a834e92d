"""The cluster at a glance, for the platform admins' dashboard: GPUs by type (in use, free,
unhealthy), alerts firing, incidents open, the last health inspection, and the heatmap.

It reads the cluster and monitoring apps together, so it lives in the portal above both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count
from django.utils.translation import gettext as _

from cluster.models import Node
from cluster.occupancy import Occupancy, occupancy
from monitoring import heatmap
from monitoring.models import Alert, AlertState, Incident, IncidentState, InspectionRun, Level

OPEN_INCIDENTS_SHOWN = 5
"""Open incidents listed by title on the dashboard; the rest are a link away."""
FIGURES = ("installed", "in_use", "free", "unhealthy", "held_back")


@dataclass
class TypeFigures:
    """GPUs of one type (or of all types) by what they are doing now."""

    gpu_type: str
    installed: int = 0
    in_use: int = 0
    free: int = 0
    unhealthy: int = 0
    held_back: int = 0

    def add(self, node: Occupancy) -> None:
        for name in FIGURES:
            setattr(self, name, getattr(self, name) + getattr(node, name))


@dataclass(frozen=True)
class Glance:
    """What an admin sees first: where the GPUs are, and what needs them."""

    gpu_types: list[TypeFigures]
    total: TypeFigures
    firing: list[tuple[str, str, int]]
    """(level, its label, alerts firing at it), the most severe first."""
    open_incidents: int
    latest_incidents: list[Incident]
    last_inspection: InspectionRun | None
    heatmap: heatmap.Heatmap


def _type_name(node: Node) -> str:
    # A node whose product label matches no GPU type is still the cluster's: shown by its label.
    return node.gpu_type.name if node.gpu_type else node.product_label or _("no GPU type")


def by_gpu_type(nodes: Iterable[Occupancy]) -> tuple[list[TypeFigures], TypeFigures]:
    """Each GPU type's figures, by name, and the sum of them all."""
    types: dict[str, TypeFigures] = {}
    total = TypeFigures(_("All types"))
    for node in nodes:
        name = _type_name(node.node)
        types.setdefault(name, TypeFigures(name)).add(node)
        total.add(node)
    return [types[name] for name in sorted(types)], total


def firing_by_level() -> list[tuple[str, str, int]]:
    counts = dict(
        Alert.objects.filter(state=AlertState.FIRING)
        .order_by()
        .values("level")
        .annotate(n=Count("id"))
        .values_list("level", "n")
    )
    return [(level, str(label), counts.get(level, 0)) for level, label in reversed(Level.choices)]


def last_inspection() -> InspectionRun | None:
    """The newest health inspection run (by its start), or None."""
    return InspectionRun.objects.first()


def glance() -> Glance:
    """Every figure of the admins' panel, in a fixed number of queries."""
    types, total = by_gpu_type(occupancy(Node.objects.select_related("gpu_type")))
    incidents = Incident.objects.filter(state=IncidentState.OPEN)
    return Glance(
        gpu_types=types,
        total=total,
        firing=firing_by_level(),
        open_incidents=incidents.count(),
        latest_incidents=list(incidents[:OPEN_INCIDENTS_SHOWN]),
        last_inspection=last_inspection(),
        heatmap=heatmap.build(),
    )
