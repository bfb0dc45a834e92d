"""The portal's own alert figures (`PORTAL_FIGURES`) as gauges for /metrics, so that the
Prometheus twins of the default rules (deploy/prometheus/rules.yaml) read the very values the
portal's rules read: whether a node is NotReady, GPUs it is missing, how long its agent has
been silent, how long a queued job has waited, whether a GPU is throttled.

Each gauge has the `node`, `gpu`, `team` and `job` labels of the DCGM ones (empty where the
subject has none: a node has no GPU, a queued job no node). It reads what a round of alert
evaluation reads (`figures.gather`) of these figures alone, once per scrape.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from monitoring.alerts.figures import PORTAL_FIGURES, Figures, Where, gather

LABELS = ["node", "gpu", "team", "job"]


def _labels(subject: str, where: Where) -> list[str]:
    gpu = subject.partition("/gpu")[2]
    job = "" if where.job_id is None else str(where.job_id)
    return [where.node, gpu, where.team, job]


def portal_figures(figures: Figures | None = None) -> Iterator[GaugeMetricFamily]:
    """One gauge per portal figure, every family present even when it has no subject."""
    figures = gather(timezone.now(), PORTAL_FIGURES) if figures is None else figures
    for metric, meaning in sorted(PORTAL_FIGURES.items()):
        family = GaugeMetricFamily(metric, f"{meaning} (the alert rules' figure).", labels=LABELS)
        for subject, (value, where) in sorted(figures.get(metric, {}).items()):
            family.add_metric(_labels(subject, where), value)
        yield family
