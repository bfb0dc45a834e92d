"""Server-side printing: `meta.k8s.io/v1 Table` responses, which kubectl asks for on `get`.

Columns follow the real printers for nodes, pods and jobs (wide columns have priority 1); other
resources get NAME and AGE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesim.clock import parse_rfc3339
from kubesim.resources import JOB, NAMESPACE, NODE, POD, Resource
from kubesim.store import Stored, dumps

Obj = dict[str, Any]
Column = tuple[str, str, int]  # name, type, priority


def age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    return f"{hours}h" if hours < 48 else f"{hours // 24}d"


def _since(stamp: str | None, now: float) -> str:
    return age(now - parse_rfc3339(stamp)) if stamp else "<unknown>"


def _node_cells(node: Obj, now: float) -> list[Any]:
    ready = next(
        (c["status"] for c in node["status"].get("conditions") or [] if c["type"] == "Ready"),
        "Unknown",
    )
    status = "Ready" if ready == "True" else "NotReady"
    if node["spec"].get("unschedulable"):
        status += ",SchedulingDisabled"
    info = node["status"].get("nodeInfo") or {}
    ip = next(
        (a["address"] for a in node["status"].get("addresses") or [] if a["type"] == "InternalIP"),
        "<none>",
    )
    return [
        node["metadata"]["name"],
        status,
        "<none>",
        _since(node["metadata"]["creationTimestamp"], now),
        info.get("kubeletVersion", ""),
        ip,
        "<none>",
        info.get("osImage", ""),
        info.get("kernelVersion", ""),
        info.get("containerRuntimeVersion", ""),
    ]


def _pod_status(pod: Obj) -> str:
    status = pod.get("status", {})
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            return str(state["waiting"]["reason"])
        if "terminated" in state and status.get("phase") not in ("Succeeded", "Failed"):
            return str(state["terminated"].get("reason", "Error"))
    if status.get("phase") == "Succeeded":
        return "Completed"
    if status.get("phase") == "Failed":
        return "Error"
    if status.get("phase") == "Pending" and pod["spec"].get("nodeName"):
        return "ContainerCreating"
    return str(status.get("phase", "Pending"))


def _pod_cells(pod: Obj, now: float) -> list[Any]:
    statuses = pod["status"].get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(c.get("restartCount", 0) for c in statuses)
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(pod['spec']['containers'])}",
        _pod_status(pod),
        restarts,
        _since(pod["metadata"]["creationTimestamp"], now),
        pod["status"].get("podIP", "<none>"),
        pod["spec"].get("nodeName", "<none>"),
        "<none>",
        "<none>",
    ]


def _job_cells(job: Obj, now: float) -> list[Any]:
    status, spec = job.get("status", {}), job["spec"]
    conditions = {c["type"]: c for c in status.get("conditions") or [] if c["status"] == "True"}
    state = next((t for t in ("Complete", "Failed", "Suspended") if t in conditions), "Running")
    started, done = status.get("startTime"), status.get("completionTime")
    duration = (
        age((parse_rfc3339(done) if done else now) - parse_rfc3339(started)) if started else ""
    )
    containers = spec["template"]["spec"]["containers"]
    selector = ",".join(
        f"{k}={v}" for k, v in (spec.get("selector", {}).get("matchLabels") or {}).items()
    )
    return [
        job["metadata"]["name"],
        state,
        f"{status.get('succeeded', 0)}/{spec.get('completions') or 1}",
        duration,
        _since(job["metadata"]["creationTimestamp"], now),
        ",".join(c["name"] for c in containers),
        ",".join(c["image"] for c in containers),
        selector,
    ]


def _namespace_cells(ns: Obj, now: float) -> list[Any]:
    return [
        ns["metadata"]["name"],
        ns.get("status", {}).get("phase", "Active"),
        _since(ns["metadata"]["creationTimestamp"], now),
    ]


def _default_cells(obj: Obj, now: float) -> list[Any]:
    return [obj["metadata"]["name"], _since(obj["metadata"].get("creationTimestamp"), now)]


PRINTERS: dict[str, tuple[list[Column], Callable[[Obj, float], list[Any]]]] = {
    NODE.key: (
        [
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        _node_cells,
    ),
    POD.key: (
        [
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        _pod_cells,
    ),
    JOB.key: (
        [
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Completions", "string", 0),
            ("Duration", "string", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _job_cells,
    ),
    NAMESPACE.key: (
        [("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)],
        _namespace_cells,
    ),
}
DEFAULT = ([("Name", "string", 0), ("Age", "string", 0)], _default_cells)


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _row(r: Resource, stored: Stored, now: float, include: str) -> bytes:
    _, cells = PRINTERS.get(r.key, DEFAULT)
    obj = stored.obj
    if include == "Object":
        embedded = stored.raw
    elif include == "None":
        embedded = b"null"
    else:
        embedded = dumps(
            {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        )
    return b'{"cells":' + dumps(cells(obj, now)) + b',"object":' + embedded + b"}"


def table(
    r: Resource, items: list[Stored], rv: int, now: float, include: str, cont: str = ""
) -> bytes:
    columns, _ = PRINTERS.get(r.key, DEFAULT)
    meta: Obj = {"resourceVersion": str(rv)}
    if cont:
        meta["continue"] = cont
    head = dumps(
        {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "columnDefinitions": [
                {
                    "name": n,
                    "type": t,
                    "format": "name" if n == "Name" else "",
                    "description": n,
                    "priority": p,
                }
                for n, t, p in columns
            ],
        }
    )
    return head[:-1] + b',"rows":[' + b",".join(_row(r, s, now, include) for s in items) + b"]}"
