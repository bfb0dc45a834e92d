"""Keep every team's namespace objects and the queues' PriorityClasses in the cluster.

The desired objects are derived from the database; an object is sent again only when what it
should be changed (or the cluster came back), so the periodic pass costs nothing when idle.
"""

from __future__ import annotations

import hashlib
import json
import logging

from django.db.models import Sum

from cluster.backend import ClusterBackend, Obj, Unavailable
from cluster.manifests import priority_class, team_objects
from quotas.models import Queue, Quota
from tenants.models import Team

log = logging.getLogger(__name__)


def desired_objects() -> list[Obj]:
    limits = dict(
        Quota.unscoped.values("team_id")
        .annotate(total=Sum("limit"))
        .values_list("team_id", "total")
    )
    objects: list[Obj] = []
    for team in Team.objects.all():
        objects += team_objects(team, int(limits.get(team.pk) or 0))
    for priority in sorted(set(Queue.unscoped.values_list("priority", flat=True))):
        objects.append(priority_class(priority))
    return objects


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"


class Provisioner:
    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend
        self.sent: dict[str, str] = {}

    def forget(self) -> None:
        """The cluster may have lost objects (it restarted): send everything again."""
        self.sent.clear()

    def sync(self) -> int:
        """Apply what changed since the last pass; returns how many objects were sent."""
        sent = 0
        for obj in desired_objects():
            key = _key(obj)
            digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
            if self.sent.get(key) == digest:
                continue
            try:
                self.backend.apply(obj)
            except Unavailable as exc:
                log.warning("provisioning %s: %s", key, exc)
                return sent
            self.sent[key] = digest
            sent += 1
        return sent
