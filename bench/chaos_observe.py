"""What the chaos bench (`bench/chaos.py`) watches while it runs, apart from the portal: the
pods kubesim starts, and the quota use the database holds."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from typing import Any

LABEL_JOB = "portal.gpu/job-id"
HOLDING = ("ADMITTED", "RUNNING")


class PodWatch(threading.Thread):
    """kubesim's pods of portal jobs, watched apart from the portal: which Kubernetes Jobs of
    each portal job started a container, and when each ended."""

    def __init__(self, server: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.server, self.stop = server, stop
        self.started: dict[int, set[str]] = defaultdict(set)
        self.ended_at: dict[str, float] = {}
        """When each Kubernetes Job's container was first seen terminated, by the Job's uid."""
        self.deleted_at: list[float] = []
        self.restarts = 0
        """Watches begun again from the current objects (a pod created and deleted meanwhile
        would be missed)."""

    def run(self) -> None:
        version = ""
        while not self.stop.is_set():
            try:
                version = self._follow(version)
            except (OSError, http.client.HTTPException, ValueError):
                self.stop.wait(1.0)

    def _follow(self, version: str) -> str:
        query = urllib.parse.urlencode(
            {
                "watch": "1",
                "labelSelector": LABEL_JOB,
                "resourceVersion": version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "30",
            }
        )
        if not version:
            self.restarts += 1
        with urllib.request.urlopen(f"{self.server}/api/v1/pods?{query}", timeout=60) as stream:
            for line in stream:
                if self.stop.is_set():
                    break
                event = json.loads(line)
                if event["type"] == "ERROR":  # 410: too far behind; start from what is there
                    return ""
                version = event["object"]["metadata"].get("resourceVersion", version)
                if event["type"] != "BOOKMARK":
                    self._pod(event["type"], event["object"])
        return version

    def _pod(self, type_: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        job_id = (meta.get("labels") or {}).get(LABEL_JOB, "")
        owners = meta.get("ownerReferences") or [{}]
        job_uid = str(owners[0].get("uid", meta.get("uid")))
        if type_ == "DELETED":
            self.deleted_at.append(time.monotonic())
        status = pod.get("status") or {}
        for container in status.get("containerStatuses") or []:
            state = container.get("state") or {}
            if "running" in state or "terminated" in state:
                self.started[int(job_id)].add(job_uid)
            if "terminated" in state:
                self.ended_at.setdefault(job_uid, time.monotonic())

    def ended_between(self, start: float, end: float) -> int:
        return sum(1 for at in self.ended_at.values() if start <= at <= end)


class QuotaSampler(threading.Thread):
    """Every second, from the database (directly, not through the proxy): admitted GPUs per
    team and GPU type against the quota's limit."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.stop = stop
        self.samples = 0
        self.violations: list[dict[str, Any]] = []
        self.peaks: dict[str, int] = defaultdict(int)
        """The most GPUs each team/type held at once: whether the limits were ever reached."""
        self.limits: dict[str, int] = {}

    def run(self) -> None:
        from django.db import DatabaseError, connection

        try:
            while not self.stop.wait(1.0):
                try:
                    self.sample()
                except DatabaseError:
                    connection.close()
        finally:
            connection.close()

    def sample(self) -> None:
        from django.db.models import F, Sum

        from jobs.models import Job
        from quotas.models import Quota

        quotas = Quota.unscoped.select_related("team", "gpu_type")
        self.limits = {f"{q.team.slug}/{q.gpu_type.name}": q.limit for q in quotas}
        held = (
            Job.unscoped.filter(state__in=HOLDING)
            .values_list("team__slug", "gpu_type__name")
            .annotate(gpus=Sum(F("nodes") * F("gpus_per_node")))
        )
        for team, gpu_type, gpus in held:
            key = f"{team}/{gpu_type}"
            self.peaks[key] = max(self.peaks[key], gpus)
            if gpus > self.limits.get(key, 0):
                self.violations.append({"at": time.monotonic(), "quota": key, "gpus": gpus})
        self.samples += 1
