"""`GET /metrics`: the portal's figures and the GPUs' latest samples, for Prometheus.

Written with prometheus-client: a collector reads the database and the latest-sample cache at
each scrape, so every web process answers alike (nothing is counted in one process's memory)
and a scrape costs a few grouped queries, whatever the number of jobs. What it exports:

- `gpuportal_jobs{state,team,gpu_type}`: jobs in each state that has not ended, the queue depth
  being `state="QUEUED"`;
- `gpuportal_jobs_ended_total{state,team,gpu_type}`: jobs that ended, by how;
- `gpuportal_gpus_held{team,gpu_type}`: GPUs held by admitted and running jobs;
- `gpuportal_job_wait_seconds`: a histogram of the wait from submission to admission of every
  job admitted so far (its last admission);
- `gpuportal_nodes{gpu_type,condition}`, `gpuportal_gpus_unhealthy{node}`;
- `gpuportal_controller_lease_seconds`: how long the leading controller's lease has left (below
  zero: no controller leads, the queue does not move);
- the GPUs' latest samples under their DCGM exporter names (`DCGM_FI_DEV_GPU_UTIL`, ...) with
  `node`, `gpu`, `team` and `job` labels (the last two empty for an idle GPU);
- the alert rules' own figures (`portal_node_not_ready`, `portal_node_gpus_missing`,
  `portal_agent_silent_seconds`, `portal_job_pending_seconds`, `portal_gpu_throttled`, ...;
  monitoring/alerts/exported.py), with the same labels: what deploy/prometheus/rules.yaml reads.

The endpoint answers only with `Authorization: Bearer <METRICS_TOKEN>`; with no token set it
does not exist (404), so no figure leaks from a portal whose operator did not ask for it.
"""

from __future__ import annotations

import hmac
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, F, Q, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from cluster.lease import NAME as LEASE_NAME
from cluster.models import Gpu, Lease, Node
from jobs.models import HOLDING_STATES, TERMINAL_STATES, Job
from monitoring import hot
from monitoring.alerts.exported import portal_figures
from monitoring.gpu_owners import placement_owners
from monitoring.schema import METRICS
from tenants.models import Team

WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600)
"""Seconds: from a second (an idle cluster) to a day (a busy one's large jobs)."""


def _job_counts() -> Iterator[Metric]:
    active = GaugeMetricFamily(
        "gpuportal_jobs",
        "Jobs that have not ended, by state.",
        labels=["state", "team", "gpu_type"],
    )
    ended = CounterMetricFamily(
        "gpuportal_jobs_ended",
        "Jobs that ended, by how they ended.",
        labels=["state", "team", "gpu_type"],
    )
    rows = Job.unscoped.values_list("state", "team__slug", "gpu_type__name").annotate(n=Count("id"))
    for state, team, gpu_type, n in rows.order_by():
        family = ended if state in TERMINAL_STATES else active
        family.add_metric([state, team, gpu_type], n)
    yield active
    yield ended


def _gpus_held() -> Metric:
    held = GaugeMetricFamily(
        "gpuportal_gpus_held",
        "GPUs held by admitted and running jobs.",
        labels=["team", "gpu_type"],
    )
    rows = (
        Job.unscoped.filter(state__in=HOLDING_STATES)
        .values_list("team__slug", "gpu_type__name")
        .annotate(gpus=Sum(F("nodes") * F("gpus_per_node")))
        .order_by()
    )
    for team, gpu_type, gpus in rows:
        held.add_metric([team, gpu_type], gpus or 0)
    return held


def _wait_histogram() -> Metric:
    """Cumulative buckets counted by the database: one aggregate over the admitted jobs."""
    admitted = Job.unscoped.filter(admitted_at__isnull=False)
    wait = F("admitted_at") - F("submitted_at")
    buckets = {
        f"le_{bound}": Count("id", filter=Q(admitted_at__lte=F("submitted_at") + _seconds(bound)))
        for bound in WAIT_BUCKETS
    }
    figures = admitted.aggregate(count=Count("id"), total=Sum(wait), **buckets)
    total = figures["total"]
    histogram = HistogramMetricFamily(
        "gpuportal_job_wait_seconds", "Wait from submission to admission of admitted jobs."
    )
    histogram.add_metric(
        [],
        [(str(float(bound)), figures[f"le_{bound}"]) for bound in WAIT_BUCKETS]
        + [("+Inf", figures["count"])],
        sum_value=total.total_seconds() if total is not None else 0.0,
    )
    return histogram


def _seconds(value: int) -> timedelta:
    return timedelta(seconds=value)


def _nodes() -> Iterator[Metric]:
    nodes = GaugeMetricFamily(
        "gpuportal_nodes", "Nodes by condition.", labels=["gpu_type", "condition"]
    )
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for gpu_type, ready, cordoned in Node.objects.values_list(
        "gpu_type__name", "ready", "cordoned"
    ):
        condition = "cordoned" if cordoned else "ready" if ready else "not_ready"
        counts[(gpu_type or "", condition)] += 1
    for labels, n in sorted(counts.items()):
        nodes.add_metric(list(labels), n)
    yield nodes
    unhealthy = GaugeMetricFamily(
        "gpuportal_gpus_unhealthy", "GPUs marked unhealthy (an Xid or ECC error).", labels=["node"]
    )
    rows = Gpu.objects.filter(healthy=False).values_list("node__name").annotate(n=Count("id"))
    for node, n in rows.order_by():
        unhealthy.add_metric([node], n)
    yield unhealthy


def _lease() -> Metric:
    lease = GaugeMetricFamily(
        "gpuportal_controller_lease_seconds",
        "Seconds left on the leading controller's lease; below zero no controller leads.",
    )
    expires = Lease.objects.filter(name=LEASE_NAME).values_list("expires_at", flat=True).first()
    if expires is not None:
        lease.add_metric([], (expires - timezone.now()).total_seconds())
    return lease


def _samples() -> Iterator[Metric]:
    nodes = dict(Node.objects.values_list("id", "name"))
    latest = hot.of_nodes(nodes)
    owners = placement_owners([nodes[node_id] for node_id in latest])
    teams = dict(Team.objects.values_list("id", "slug"))
    families: dict[str, GaugeMetricFamily] = {}
    for node_id, samples in sorted(latest.items()):
        name = nodes[node_id]
        for index, sample in sorted(samples.items()):
            owner = owners.get(name, {}).get(index)
            labels = [
                name,
                str(index),
                teams.get(owner.team_id, "") if owner else "",
                str(owner.job_id) if owner else "",
            ]
            for field, value in sample.items():
                if field not in METRICS or not isinstance(value, int | float):
                    continue
                family = families.get(field)
                if family is None:
                    family = families[field] = GaugeMetricFamily(
                        field, f"{field}, the GPU's latest sample.", labels=LABELS
                    )
                family.add_metric(labels, value)
    yield from families.values()


LABELS = ["node", "gpu", "team", "job"]


class PortalCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from _job_counts()
        yield _gpus_held()
        yield _wait_histogram()
        yield from _nodes()
        yield _lease()
        yield from _samples()
        yield from portal_figures()


registry = CollectorRegistry(auto_describe=False)
registry.register(PortalCollector())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The figures above in Prometheus' text format, for the holder of METRICS_TOKEN."""
    token = settings.METRICS_TOKEN
    if not token:
        raise Http404
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(given.encode(), token.encode()):
        return HttpResponse(status=401, headers={"WWW-Authenticate": "Bearer"})
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
