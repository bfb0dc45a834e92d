"""The cluster: node and GPU inventory, the ClusterBackend seam and its Kubernetes adapter, and
the controller role (scheduling cycles, watches, reconciliation, log followers)."""
