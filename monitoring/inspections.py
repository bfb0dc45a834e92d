"""Health inspection (巡检): every GPU node checked over what the portal already stores of it.

`inspect` reads each node's record, its agent's latest samples and the previous inspection's
figures (it calls no node), runs the checks of `monitoring.inspection_checks`, and keeps one
InspectionRun with a result per node and check. The alert rules read the latest run through
`failed_checks` (the `portal_node_inspection_failed` figure): a failing node raises one alert,
kept across runs while it fails and resolved by the first run it passes.

A node the fault loop cordoned comes back when an inspection passes it (no check failed), with
the uncordon audited and written in its incident; a node an admin cordoned stays until an admin
uncordons it. The leading controller runs an inspection every INSPECTION_EVERY_MINUTES, and an
admin may ask for one at any time (`monitoring.tasks.inspect_nodes`, a Celery task).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.models import AuditEvent
from audit.record import record
from cluster.actions import set_cordon
from cluster.backend import ClusterBackend, Unavailable
from cluster.models import Gpu, Node
from monitoring import hot
from monitoring.incidents import log_event
from monitoring.inspection_checks import (
    Finding,
    Fleet,
    NodeFacts,
    driver_version,
    fleet_driver,
    inspect_node,
)
from monitoring.models import (
    CheckStatus,
    Incident,
    IncidentState,
    InspectionResult,
    InspectionRun,
    InspectionTrigger,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

log = logging.getLogger(__name__)
GPU_NODES = Q(gpu_capacity__gt=0) | ~Q(product_label="") | ~Q(agent_token_hash="")
"""The nodes inspected: those with GPUs (by capacity, GPU Feature Discovery's product label, or
an agent: a node whose device plugin died reports no capacity), not the cluster's CPU nodes."""
DELTA_CHECKS = ("ecc", "ecc_corrected")
"""Checks that judge a counter's growth since the previous inspection."""


def inspect(
    now: datetime, *, backend: ClusterBackend, requested_by: User | None = None
) -> InspectionRun:
    """Inspect every node as of `now`; bring back the fault loop's nodes that passed."""
    trigger = InspectionTrigger.ADMIN if requested_by else InspectionTrigger.SCHEDULE
    previous = _latest_finished()
    run = InspectionRun.objects.create(started_at=now, trigger=trigger, requested_by=requested_by)
    nodes = list(Node.objects.filter(GPU_NODES))
    facts = _facts(nodes, previous)
    fleet = Fleet(now.timestamp(), fleet_driver(f.driver for f in facts.values()))
    findings = {node.pk: inspect_node(facts[node.pk], fleet) for node in nodes}
    failed = {pk for pk, found in findings.items() if _fails(found)}
    with transaction.atomic():
        InspectionResult.objects.bulk_create(
            InspectionResult(
                run=run,
                node_id=pk,
                check_name=f.check,
                status=f.status,
                figure=f.figure,
                detail=f.detail[:500],
            )
            for pk, found in findings.items()
            for f in found
        )
        run.nodes_failed, run.nodes_passed = len(failed), len(nodes) - len(failed)
        run.finished_at = timezone.now()
        run.save(update_fields=["nodes_failed", "nodes_passed", "finished_at"])
        after = {"trigger": trigger, "passed": run.nodes_passed, "failed": run.nodes_failed}
        record("inspection.run", actor=requested_by, team=None, target=run, after=after)
    passed = [node for node in nodes if node.cordoned and node.pk not in failed]
    run.uncordoned = _bring_back(run, passed, backend)
    run.save(update_fields=["uncordoned"])
    _prune(now)
    return run


def _fails(found: list[Finding]) -> bool:
    return any(f.status == CheckStatus.FAIL for f in found)


def _latest_finished() -> InspectionRun | None:
    return InspectionRun.objects.filter(finished_at__isnull=False).first()


def _facts(nodes: list[Node], previous: InspectionRun | None) -> dict[int, NodeFacts]:
    samples = hot.of_nodes(node.pk for node in nodes)
    hosts = hot.hosts(node.pk for node in nodes)
    out_of_service: dict[int, list[int]] = defaultdict(list)
    for node_id, index in Gpu.objects.filter(healthy=False).values_list("node_id", "index"):
        out_of_service[node_id].append(index)
    figures: dict[int, dict[str, float | None]] = defaultdict(dict)
    if previous is not None:
        rows = InspectionResult.objects.filter(run=previous, check_name__in=DELTA_CHECKS)
        for node_id, check, figure in rows.values_list("node_id", "check_name", "figure"):
            figures[node_id][check] = figure
    return {
        node.pk: NodeFacts(
            name=node.name,
            ready=node.ready,
            capacity=node.gpu_capacity,
            allocatable=node.gpu_allocatable,
            has_agent=bool(node.agent_token_hash),
            out_of_service=sorted(out_of_service[node.pk]),
            samples=samples.get(node.pk, {}),
            host=hosts.get(node.pk, {}),
            driver=node.driver_version or driver_version(node.labels or {}),
            previous=figures[node.pk],
        )
        for node in nodes
    }


def fault_cordoned(nodes: list[Node]) -> set[int]:
    """The nodes among these that the fault loop cordoned, not an admin.

    A node keeps only its cordon's reason; who cordoned it is in the audit trail: the fault
    loop's cordon is recorded without an actor, an admin's with them. A node whose last
    recorded cordon or uncordon is not the fault loop's cordon (an admin's, or a cordon made
    outside the portal after an uncordon) is left as it is.
    """
    ids = {str(node.pk): node.pk for node in nodes}
    last: dict[int, tuple[str, int | None]] = {}
    events = AuditEvent.chain.filter(  # the raw trail: a platform-wide read by the system
        action__in=("node.cordon", "node.uncordon"),
        target_type=Node._meta.label_lower,
        target_id__in=list(ids),
    ).order_by("seq")
    for target, action, actor in events.values_list("target_id", "action", "actor_id"):
        last[ids[target]] = (action, actor)
    return {pk for pk, (action, actor) in last.items() if action == "node.cordon" and not actor}


def _bring_back(run: InspectionRun, passed: list[Node], backend: ClusterBackend) -> list[str]:
    """Uncordon the fault loop's nodes that passed; a cluster API away leaves them for the
    next run."""
    ours = fault_cordoned(passed)
    back = []
    reason = _("passed health inspection %(id)d") % {"id": run.pk}
    for node in (n for n in passed if n.pk in ours):
        try:
            set_cordon(node, False, reason=reason, acting_user=None, backend=backend)
        except Unavailable:
            log.warning("inspection %s: %s passed but the cluster API is away", run.pk, node.name)
            continue
        back.append(node.name)
        _tell_incident(node, reason)
    return back


def _tell_incident(node: Node, reason: str) -> None:
    for incident in Incident.objects.filter(state=IncidentState.OPEN):  # a handful at most
        if node.name in incident.nodes:
            text = _("node %(node)s uncordoned: %(reason)s") % {"node": node.name, "reason": reason}
            log_event(incident, "action", text, at=timezone.now())


def failed_checks() -> dict[int, int]:
    """{node id: checks failed} of every node in the latest finished inspection (the alert
    rules' `portal_node_inspection_failed`)."""
    run = _latest_finished()
    if run is None:
        return {}
    rows = (
        InspectionResult.objects.filter(run=run)
        .order_by()
        .values("node_id")
        .annotate(failed=Count("pk", filter=Q(status=CheckStatus.FAIL)))
        .values_list("node_id", "failed")
    )
    return dict(rows)


def _prune(now: datetime) -> None:
    """Inspections older than INSPECTION_RETENTION_DAYS go (their results with them)."""
    cutoff = now - timedelta(days=settings.INSPECTION_RETENTION_DAYS)
    InspectionRun.objects.filter(started_at__lt=cutoff).delete()
