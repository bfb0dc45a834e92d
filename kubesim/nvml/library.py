"""Placeholder replaced below."""

from __future__ import annotations

from kubesim.nvml.gpu import NodeGpus


class FakeNvmlLibrary:
    def __init__(self, gpus: NodeGpus) -> None:
        self.gpus = gpus
