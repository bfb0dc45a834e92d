"""Kubernetes objects for a team and for an admitted job, as plain dicts (DESIGN.md section 6).

Pure functions of the portal's records, so they are unit-tested without a cluster and the one
module that imports the Kubernetes client only sends them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from jobs.models import Job
from tenants.models import Team

PORTAL = "gpu-portal"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
LABEL_TEAM = "portal.gpu/team"
LABEL_JOB = "portal.gpu/job-id"
ANNOTATION_OWNER = "portal.gpu/owner"
ANNOTATION_ATTEMPT = "portal.gpu/attempt"
GPU = "nvidia.com/gpu"
FINISHED_TTL_S = 3600
"""How long a finished Job stays once the portal has recorded its outcome. A Job is created
without a TTL and given this one only then (`cluster.controller.Controller._expire_recorded`):
a TTL from its creation let Kubernetes delete a Job that finished while the controller was
away, and its job, its outcome lost, ran again."""
# Simulation hints: a job's env may carry these for kubesim (the demo's and the tests' cluster),
# which reads them as pod annotations; a real cluster ignores the annotations.
SIMULATION_HINTS = {
    "KUBESIM_RUNTIME_SECONDS": "kubesim.io/runtime-seconds",
    "KUBESIM_EXIT_CODE": "kubesim.io/exit-code",
    "KUBESIM_GPU_UTIL": "kubesim.io/gpu-util",
}
RESTRICTED = {"pod-security.kubernetes.io/" + mode: "restricted" for mode in ("enforce", "warn")}
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # Kubernetes puts it on a Job's pods
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"  # ... and an Indexed Job's index
ANNOTATION_DEADLINE = "portal.gpu/preemption-deadline"
"""Set on a preempted job's pods: when it is stopped (RFC 3339, UTC); removed if withdrawn."""
PODINFO_DIR = "/etc/podinfo"
DEADLINE_FILE = "preemption-deadline"
"""The annotation as a file in every container (downward API): empty until a notice."""
TERMINATION_GRACE_S = 30
"""terminationGracePeriodSeconds of a job's pods: SIGTERM comes this long before the deadline."""
MASTER_PORT = 29500
"""The rendezvous port of rank 0 (torchrun's default)."""


def sigterm_lead(grace_s: float) -> float:
    """How long before a preemption deadline a victim's pods get SIGTERM: the pods' termination
    grace, or half the preemption grace where that is shorter (SIGKILL comes at the deadline)."""
    return min(float(TERMINATION_GRACE_S), grace_s / 2)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_name(job: Job) -> str:
    """Deterministic, so a retried create meets 409 instead of making a second Job."""
    return f"job-{job.pk}-{job.attempts}"


POD_OF_JOB = re.compile(r"^(job-(\d+)-\d+)-")  # an Indexed Job's pods: <job>-<index>-<suffix>


def job_of_pod(pod: str) -> tuple[int, str] | None:
    """(portal job id, Kubernetes Job name) of a pod a portal Job created, by its name."""
    match = POD_OF_JOB.match(pod)
    return (int(match.group(2)), match.group(1)) if match else None


def priority_class_name(priority: int) -> str:
    return f"{PORTAL}-p{priority}".replace("-p-", "-m")


def _labels(team: Team) -> dict[str, str]:
    return {LABEL_MANAGED: PORTAL, LABEL_TEAM: team.slug}


def team_objects(team: Team, gpu_limit: int) -> list[dict[str, Any]]:
    """Namespace, ResourceQuota, LimitRange, default-deny NetworkPolicy, quiet service account."""
    ns, labels = team.namespace, _labels(team)
    meta = {"namespace": ns, "labels": labels}
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {**labels, **RESTRICTED}},
        },
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpu-quota", **meta},
            "spec": {"hard": {f"requests.{GPU}": str(gpu_limit)}},
        },
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "defaults", **meta},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "defaultRequest": {"cpu": "1", "memory": "4Gi"},
                        "default": {"cpu": "4", "memory": "16Gi"},
                    }
                ]
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny", **meta},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", **meta},
            "automountServiceAccountToken": False,
        },
    ]


def priority_class(priority: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(priority), "labels": {LABEL_MANAGED: PORTAL}},
        "value": priority,
        "globalDefault": False,
        "description": "GPU portal queue priority",
    }


def _affinity(nodes: list[str], name: str) -> dict[str, Any]:
    # Pinned to the scheduler's nodes, one pod per node: the scheduler places a multi-pod job's
    # pods on distinct nodes (`scheduler.placement`), so every pod has a node it may run on at
    # the same time as its peers, and the gang lands where it was placed.
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": sorted(nodes)}
                        ]
                    }
                ]
            }
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {JOB_NAME_LABEL: name}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        },
    }


def pod_address(job: Job, index: int) -> str:
    """The DNS name of a multi-pod job's pod: `<hostname>.<subdomain>.<namespace>.svc`.

    An Indexed Job's pod is named host `<job>-<index>` by Kubernetes; its `subdomain` is the
    job's headless Service (`service_object`), which gives it this name. The cluster domain is
    left to the pod's DNS search path, so the name holds whatever the cluster calls it.
    """
    name = job_name(job)
    return f"{name}-{index}.{name}.{job.team.namespace}.svc"


def rendezvous_env(job: Job) -> list[dict[str, Any]]:
    """What torchrun and `torch.distributed` read, for every pod of a multi-pod job.

    As Kubeflow's PyTorchJob sets them: WORLD_SIZE counts processes (one per GPU), RANK and
    NODE_RANK are the pod's completion index, read through the downward API. The PET_ names are
    torchrun's own defaults for its options, so `torchrun train.py` needs no flags.
    """
    node_rank = {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}
    values = {
        "MASTER_ADDR": pod_address(job, 0),
        "MASTER_PORT": str(MASTER_PORT),
        "WORLD_SIZE": str(job.nodes * job.gpus_per_node),
        "NNODES": str(job.nodes),
        "LOCAL_WORLD_SIZE": str(job.gpus_per_node),
        "PET_MASTER_ADDR": pod_address(job, 0),
        "PET_MASTER_PORT": str(MASTER_PORT),
        "PET_NNODES": str(job.nodes),
        "PET_NPROC_PER_NODE": str(job.gpus_per_node),
    }
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in values.items()]
    return env + [
        {"name": k, "valueFrom": node_rank} for k in ("RANK", "NODE_RANK", "PET_NODE_RANK")
    ]


def _env(job: Job) -> list[dict[str, Any]]:
    """The job's own variables, then the rendezvous (which wins over a name the job set)."""
    rendezvous = rendezvous_env(job) if job.nodes > 1 else []
    reserved = {e["name"] for e in rendezvous}
    own = [{"name": k, "value": v} for k, v in sorted(job.env.items()) if k not in reserved]
    return own + rendezvous


def _container(job: Job) -> dict[str, Any]:
    resources = {"cpu": str(job.cpu), "memory": job.memory, GPU: str(job.gpus_per_node)}
    return {
        "name": "main",
        "image": job.image,
        "command": list(job.command),
        "args": list(job.args),
        "env": _env(job),
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": [{"name": "podinfo", "mountPath": PODINFO_DIR, "readOnly": True}],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def _podinfo_volume() -> dict[str, Any]:
    field = f"metadata.annotations['{ANNOTATION_DEADLINE}']"
    items = [{"path": DEADLINE_FILE, "fieldRef": {"fieldPath": field}}]
    return {"name": "podinfo", "downwardAPI": {"items": items}}


def deadline_patch(deadline: datetime | None) -> dict[str, Any]:
    """The merge patch that tells a job's pod its preemption deadline, or takes it back."""
    value = rfc3339(deadline) if deadline is not None else None
    return {"metadata": {"annotations": {ANNOTATION_DEADLINE: value}}}


def job_object(job: Job) -> dict[str, Any]:
    """The batch/v1 Job of an admitted portal job (Indexed, one pod per placed node)."""
    name, nodes = job_name(job), sorted(job.placement)
    labels = {**_labels(job.team), LABEL_JOB: str(job.pk)}
    hints = {SIMULATION_HINTS[k]: v for k, v in job.env.items() if k in SIMULATION_HINTS}
    pod_annotations = {ANNOTATION_ATTEMPT: str(job.attempts), **hints}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "priorityClassName": priority_class_name(job.queue.priority),
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "affinity": _affinity(nodes, name),
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [_container(job)],
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        "volumes": [_podinfo_volume()],
    }
    if job.nodes > 1:
        pod_spec["subdomain"] = name  # the headless Service: pods get stable DNS names
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": job.team.namespace,
            "labels": labels,
            "annotations": {
                ANNOTATION_OWNER: job.owner.get_username(),
                ANNOTATION_ATTEMPT: str(job.attempts),
            },
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": job.nodes,
            "parallelism": job.nodes,
            "backoffLimit": 0,
            "activeDeadlineSeconds": job.max_runtime,
            "template": {
                "metadata": {"labels": labels, "annotations": pod_annotations},
                "spec": pod_spec,
            },
        },
    }


def companion_objects(job: Job, job_uid: str) -> list[dict[str, Any]]:
    """What a multi-pod job needs besides its Job: a headless Service (its pods' DNS names) and
    a NetworkPolicy letting its pods reach each other through the team's default deny. Owned
    by the Job (`job_uid`), so Kubernetes deletes them with it, whoever deletes it."""
    if job.nodes < 2:
        return []
    name = job_name(job)
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": name,
        "uid": job_uid,
        "blockOwnerDeletion": False,
    }
    meta = {
        "namespace": job.team.namespace,
        "labels": {**_labels(job.team), LABEL_JOB: str(job.pk)},
        "ownerReferences": [owner],
    }
    return [service_object(name, meta), peers_policy(name, meta)]


def service_object(name: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, **meta},
        "spec": {
            "clusterIP": "None",
            "selector": {JOB_NAME_LABEL: name},
            # Peers look rank 0 up as they start, before anything reports ready.
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rendezvous", "port": MASTER_PORT, "protocol": "TCP"}],
        },
    }


DNS_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}


def peers_policy(name: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The job's pods, to and from each other on any port (NCCL picks its own), and to the
    cluster DNS, without which MASTER_ADDR does not resolve; nothing else of the team's."""
    peers = [{"podSelector": {"matchLabels": {JOB_NAME_LABEL: name}}}]
    dns_ports = [{"protocol": protocol, "port": 53} for protocol in ("UDP", "TCP")]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{name}-peers", **meta},
        "spec": {
            "podSelector": {"matchLabels": {JOB_NAME_LABEL: name}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": peers}],
            "egress": [{"to": peers}, {"to": [DNS_PEER], "ports": dns_ports}],
        },
    }
