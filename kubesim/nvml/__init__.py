"""Simulated GPUs and a fake NVML library over them (plugs in under pynvml via agent.nvml)."""
