"""The fault loop, a duty of the leading controller: detect → diagnose → recover → record.

Each Xid not yet handled (and each GPU whose ECC or row-remap counters call for it) is
classified (`monitoring.catalog`), then acted on per node, by the most severe action found:

- restart the job: the jobs on that GPU go back to the queue (an attempt counted); the GPU stays.
- reset the GPU: the GPU leaves service (unhealthy: out of the scheduler's capacity) and its
  jobs are requeued; the node keeps serving its other GPUs.
- reboot the node / replace the GPU: the node is cordoned through the cluster's cordon path and
  every job on it requeued.

The moved jobs' owners and the admins are told, and the node's open incident (or a new one)
gets the timeline. A cordoned node comes back by an admin's uncordon or once a health inspection
passes it (`monitoring.inspections`); its GPUs return to service from the incident's page.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from django.utils import timezone
from django.utils.translation import gettext as _

from audit.record import record
from cluster.actions import set_cordon
from cluster.backend import ClusterBackend
from cluster.locked import LockedJobs
from cluster.models import Gpu, Node
from cluster.observe import Deletion, requeue_or_fail
from jobs.models import HOLDING_STATES, Job
from monitoring import hot
from monitoring.catalog import CORDONS, GPU_OUT, SEVERITY, Action, classify_counters, describe_xid
from monitoring.incidents import incident_for, log_event
from monitoring.models import Incident, XidEvent
from notifications.send import notify, notify_admins

log = logging.getLogger(__name__)
BATCH = 500


@dataclass
class Fault:
    """One reason to act on one GPU."""

    node: Node
    index: int
    action: str
    cause: str
    xid_ids: list[int] = field(default_factory=list)


@dataclass
class Recovery:
    """What acting on one node did."""

    incident: Incident
    action: str
    cordoned: bool
    requeued: list[Job]


@dataclass
class FaultLoop:
    backend: ClusterBackend
    writing: Callable[[], AbstractContextManager[LockedJobs]]
    delete_on_commit: Callable[[list[Deletion]], None]
    requeued: Callable[[list[int]], None]
    """Tells the scheduler's kept queue that these jobs are back (after the commit)."""

    def run(self) -> list[Recovery]:
        """Act on the Xids not handled yet."""
        return self.recover(xid_faults())

    def run_counters(self) -> list[Recovery]:
        """Act on GPUs still in service whose ECC or remap counters call for it."""
        return self.recover(counter_faults())

    def recover(self, faults: list[Fault]) -> list[Recovery]:
        by_node: dict[int, list[Fault]] = defaultdict(list)
        for fault in faults:
            by_node[fault.node.pk].append(fault)
        return [self._recover_node(node_faults) for node_faults in by_node.values()]

    def _recover_node(self, faults: list[Fault]) -> Recovery:
        node = faults[0].node
        action = max((Action(f.action) for f in faults), key=SEVERITY.index)
        reason = _("%(action)s after %(cause)s") % {
            "action": Action(action).label,
            "cause": "; ".join(sorted({f.cause for f in faults})),
        }
        cordon = action in CORDONS and not node.cordoned
        if cordon:  # before the transaction: a cluster API away leaves the Xids for next turn
            set_cordon(node, True, reason=reason[:255], acting_user=None, backend=self.backend)
        gpus = sorted({f.index for f in faults})
        job_ids = _affected_jobs(node, gpus, whole_node=action in CORDONS)
        with self.writing() as locked:
            requeued = _requeue(locked, job_ids, node.name, reason, self.delete_on_commit)
            if action in GPU_OUT:  # an Xid's GPU left at its arrival (`xids.store_xids`)
                by_counters = [f.index for f in faults if not f.xid_ids]
                Gpu.objects.filter(node=node, index__in=by_counters).update(healthy=False)
            incident = _record(node, faults, action, cordon, requeued)
            XidEvent.objects.filter(pk__in=[i for f in faults for i in f.xid_ids]).update(
                handled_at=timezone.now()
            )
            _tell(incident, requeued)
        ids = [job.pk for job in requeued]
        if ids:
            self.requeued(ids)  # committed: the scheduler may read them back
        return Recovery(incident, action, cordon, requeued)


def xid_faults(limit: int = BATCH) -> list[Fault]:
    events = XidEvent.objects.filter(handled_at=None).select_related("node", "gpu").order_by("id")
    by_gpu: dict[tuple[int, int], Fault] = {}
    for event in events[:limit]:
        key = (event.node_id, event.gpu.index)
        cause = _("Xid %(xid)d (%(what)s)") % {"xid": event.xid, "what": describe_xid(event.xid)}
        fault = by_gpu.get(key)
        if fault is None:
            fault = by_gpu[key] = Fault(event.node, event.gpu.index, event.action, cause)
        elif SEVERITY.index(Action(event.action)) > SEVERITY.index(Action(fault.action)):
            fault.action, fault.cause = event.action, cause
        fault.xid_ids.append(event.pk)
    return list(by_gpu.values())


def counter_faults() -> list[Fault]:
    nodes = {node.pk: node for node in Node.objects.all()}
    healthy = set(Gpu.objects.filter(healthy=True).values_list("node_id", "index"))
    faults = []
    for node_id, samples in hot.of_nodes(nodes).items():
        for index, sample in samples.items():
            action = classify_counters(sample)
            if action != Action.NONE and (node_id, index) in healthy:
                cause = _("ECC or row-remap counters of GPU %(index)d") % {"index": index}
                faults.append(Fault(nodes[node_id], index, action, cause))
    return faults


def _affected_jobs(node: Node, gpus: Iterable[int], *, whole_node: bool) -> list[int]:
    """The jobs holding GPUs on the node: all of them, or those on `gpus` where the latest
    samples say which job each GPU serves (all of them where a GPU has no sample)."""
    on_node = [
        job.pk
        for job in Job.unscoped.filter(state__in=HOLDING_STATES).only("id", "placement")
        if node.name in job.placement
    ]
    if whole_node:
        return on_node
    samples = hot.of_nodes([node.pk]).get(node.pk, {})
    if any(index not in samples for index in gpus):
        return on_node
    serving = {samples[index].get("job_id") for index in gpus}
    return [job_id for job_id in on_node if job_id in serving]


def _requeue(
    locked: LockedJobs,
    job_ids: list[int],
    node: str,
    reason: str,
    delete_on_commit: Callable[[list[Deletion]], None],
) -> list[Job]:
    locked.lock(job_ids)
    moved, deletions = [], []
    for job in filter(None, map(locked.get, job_ids)):
        if job.state in HOLDING_STATES and node in job.placement:
            deletions.append(requeue_or_fail(job, reason, locked.moves))
            moved.append(job)
    delete_on_commit(deletions)
    return moved


def _record(
    node: Node, faults: list[Fault], action: str, cordoned: bool, requeued: list[Job]
) -> Incident:
    now = timezone.now()
    incident, opened = incident_for(node, action, now)
    for fault in faults:
        log_event(incident, "fault", f"{node.name}/gpu{fault.index}: {fault.cause}", at=now)
    what = Action(action).label
    log_event(incident, "action", _("classified: %(action)s") % {"action": what}, at=now)
    if cordoned:
        log_event(incident, "action", _("node %(node)s cordoned") % {"node": node.name}, at=now)
    if action in GPU_OUT:
        taken = ", ".join(f"gpu{f.index}" for f in faults)
        log_event(incident, "action", _("taken out of service: %(gpus)s") % {"gpus": taken}, at=now)
    for job in requeued:
        text = _("job %(id)d (%(team)s) %(state)s: %(reason)s")
        values = {
            "id": job.pk,
            "team": job.team.slug,
            "state": job.state,
            "reason": job.state_reason,
        }
        log_event(incident, "action", text % values, at=now)
    incident.gpus = sorted({*incident.gpus, *(f"{node.name}/{f.index}" for f in faults)})
    incident.jobs = sorted({*incident.jobs, *(job.pk for job in requeued)})
    incident.teams = sorted({*incident.teams, *(job.team.slug for job in requeued)})
    incident.save(update_fields=["gpus", "jobs", "teams", "action"])
    after = {"node": node.name, "action": action, "gpus": incident.gpus, "jobs": incident.jobs}
    record(
        "incident.open" if opened else "incident.update",
        actor=None,
        team=None,
        target=incident,
        after=after,
    )
    return incident


def _tell(incident: Incident, requeued: list[Job]) -> None:
    link = f"/incidents/{incident.pk}/"
    for job in requeued:
        title = _("Job %(name)s (%(id)d) was moved off a faulty GPU") % {
            "name": job.name,
            "id": job.pk,
        }
        notify(
            [job.owner],
            level="warning",
            title=title,
            body=job.state_reason,
            link=f"/jobs/{job.pk}/",
            team=job.team,
        )
    notify_admins(
        level="critical",
        title=incident.title,
        body=_("%(jobs)d jobs requeued") % {"jobs": len(requeued)},
        link=link,
    )
    log_event(incident, "notification", _("owners and admins notified"), at=timezone.now())
