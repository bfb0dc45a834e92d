"""The process's ClusterBackend, built once from KUBECONFIG (or in-cluster config)."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from cluster.backend import ClusterBackend
from cluster.kube import KubernetesBackend, load_api_client


@cache
def backend() -> ClusterBackend:
    return KubernetesBackend(load_api_client(settings.KUBECONFIG or None))
