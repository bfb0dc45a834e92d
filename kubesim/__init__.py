"""kubesim: a Kubernetes API emulator with simulated GPU nodes and a fake NVML.

The cluster of `make demo` and of the test suite: the portal and kubectl talk to it exactly as
to a real cluster, through a kubeconfig.
"""

from kubesim.clock import Clock, ManualClock, ScaledClock
from kubesim.cluster import ClusterSpec, Pool, default_cluster, load_cluster, parse_cluster
from kubesim.faults import KINDS as FAULT_KINDS
from kubesim.faults import Fault
from kubesim.server import KubeSim

__all__ = [
    "FAULT_KINDS",
    "Clock",
    "ClusterSpec",
    "Fault",
    "KubeSim",
    "ManualClock",
    "Pool",
    "ScaledClock",
    "default_cluster",
    "load_cluster",
    "parse_cluster",
]
