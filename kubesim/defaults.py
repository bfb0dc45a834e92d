"""Defaulting, as the API server's defaulters fill in fields a client leaves out.

The portal and kubectl read these fields back (restartPolicy, requests defaulted from limits, the
Job selector and template labels), so a simulated object looks like one from a real cluster.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
CONTROLLER_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")


def _image_pull_policy(image: str) -> str:
    tail = image.rsplit("/", 1)[-1]
    return "IfNotPresent" if ":" in tail and not tail.endswith(":latest") else "Always"


def default_container(container: Obj) -> None:
    container.setdefault("imagePullPolicy", _image_pull_policy(str(container.get("image", ""))))
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    requests = resources.setdefault("requests", {}) if limits else resources.get("requests")
    for name, value in limits.items():
        if requests is not None:
            requests.setdefault(name, value)


def default_pod_spec(spec: Obj, restart_policy: str = "Always") -> None:
    spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for container in spec.get("initContainers") or []:
        default_container(container)
    for container in spec.get("containers") or []:
        default_container(container)


def add_default_tolerations(spec: Obj, seconds: int) -> None:
    """The DefaultTolerationSeconds admission plugin (its seconds are the cluster's grace)."""
    tolerations = spec.setdefault("tolerations", [])
    present = {t.get("key") for t in tolerations}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if key not in present:
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": seconds,
                }
            )


def qos_class(spec: Obj) -> str:
    containers = spec.get("containers") or []
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        all(k in (r.get("limits") or {}) for k in ("cpu", "memory"))
        and (r.get("requests") or {}) == (r.get("limits") or {})
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def default_pod(pod: Obj, toleration_seconds: int) -> None:
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("serviceAccountName", "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    add_default_tolerations(spec, toleration_seconds)
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def default_job(job: Obj) -> None:
    meta, spec = job["metadata"], job.setdefault("spec", {})
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    uid, name = meta["uid"], meta["name"]
    ours = dict.fromkeys(CONTROLLER_UID_LABELS, uid) | dict.fromkeys(JOB_NAME_LABELS, name)
    spec.setdefault("selector", {"matchLabels": {CONTROLLER_UID_LABELS[0]: uid}})
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = (tmeta.get("labels") or {}) | ours
    default_pod_spec(template.setdefault("spec", {}), "Never")
    job["status"] = {}


def default_namespace(namespace: Obj) -> None:
    meta = namespace["metadata"]
    meta["labels"] = (meta.get("labels") or {}) | {"kubernetes.io/metadata.name": meta["name"]}
    namespace["spec"] = {"finalizers": ["kubernetes"]}
    namespace["status"] = {"phase": "Active"}


def default_service(service: Obj, cluster_ip: str) -> None:
    """Type ClusterIP, and an address unless the Service is headless (clusterIP "None")."""
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("clusterIP", cluster_ip)
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("ipFamilies", ["IPv4"])
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    service["status"] = {"loadBalancer": {}}
