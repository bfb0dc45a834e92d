"""The heatmap's cells: every node's GPUs with their latest reading and a utilisation band.

Bands, not a continuous shade, so the legend can name each colour and the page's script (which
reads the band width from the table) colours live updates the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster.models import Gpu, Node
from monitoring import hot

BAND_WIDTH = 20
"""Percent of utilisation per colour band: 0-19 is band 0, ..., 80-100 is band 4."""
BANDS = tuple(range(100 // BAND_WIDTH))


def band_of(util: int) -> int:
    return min(BANDS[-1], max(0, util // BAND_WIDTH))


@dataclass(frozen=True)
class Cell:
    """One GPU: its latest sample (None when the agent sent none lately) and its colour band."""

    gpu: Gpu
    latest: dict[str, Any] | None

    @property
    def util(self) -> int | None:
        """Utilisation in whole percent, rounded half up as the page's script rounds it."""
        value = (self.latest or {}).get("DCGM_FI_DEV_GPU_UTIL")
        return None if value is None else int(float(value) + 0.5)

    @property
    def band(self) -> int | None:
        util = self.util
        return None if util is None else band_of(util)


@dataclass(frozen=True)
class Heatmap:
    """Every node with its GPUs' cells, and the key of the colours."""

    rows: list[tuple[Node, list[Cell]]]
    band_width: int = BAND_WIDTH

    @property
    def legend(self) -> list[tuple[int, int, int]]:
        """(band, lowest, highest percent) of each band."""
        last = BANDS[-1]
        return [(b, b * BAND_WIDTH, 100 if b == last else (b + 1) * BAND_WIDTH - 1) for b in BANDS]


def build() -> Heatmap:
    """The map of every node, in two queries and one cache read."""
    nodes = list(Node.objects.select_related("gpu_type").prefetch_related("gpus"))
    latest = hot.latest((gpu.node_id, gpu.index) for node in nodes for gpu in node.gpus.all())
    return Heatmap(
        [
            (node, [Cell(gpu, latest.get((node.pk, gpu.index))) for gpu in node.gpus.all()])
            for node in nodes
        ]
    )
