"""The fake NVML read through the real pynvml, as the agent reads a real GPU."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pynvml
import pytest
from kubernetes import client

from agent.nvml import use_library
from kubesim import KubeSim
from tests.kubesim.conftest import pod_manifest, wait_for

NODE = "h100-b-3"


@pytest.fixture
def nvml(sim: KubeSim) -> Iterator[None]:
    previous = pynvml.nvmlLib
    use_library(sim.nvml_library(NODE))
    pynvml.nvmlInit()
    try:
        yield
    finally:
        pynvml.nvmlShutdown()
        sim.clear_faults(node=NODE)
        use_library(previous)


def _busy_pod(core: client.CoreV1Api, namespace: str) -> None:
    pin = {"nodeSelector": {"kubernetes.io/hostname": NODE}}
    body = pod_manifest("busy", gpus=8, runtime=600, **pin)
    body["metadata"]["annotations"]["kubesim.io/gpu-util"] = "80"
    core.create_namespaced_pod(namespace, body)
    wait_for(
        lambda: core.read_namespaced_pod("busy", namespace).status.phase == "Running",
        what="Running",
    )


def test_static_fields_describe_the_gpu(nvml: None) -> None:
    assert pynvml.nvmlDeviceGetCount() == 8
    handle = pynvml.nvmlDeviceGetHandleByIndex(3)
    assert pynvml.nvmlDeviceGetName(handle) == "NVIDIA H100 80GB HBM3"
    assert pynvml.nvmlDeviceGetUUID(handle).startswith("GPU-")
    assert pynvml.nvmlDeviceGetIndex(handle) == 3
    assert pynvml.nvmlDeviceGetMemoryInfo(handle).total == 81559 * 2**20
    assert pynvml.nvmlSystemGetDriverVersion() == "570.86.15"
    assert pynvml.nvmlDeviceGetNvLinkState(handle, 0) == 1


def test_idle_gpu_reads_idle(nvml: None) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetUtilizationRates(handle).gpu == 0
    assert (
        pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle) == pynvml.nvmlClocksEventReasonGpuIdle
    )
    assert pynvml.nvmlDeviceGetPowerUsage(handle) == 70000


def test_readings_follow_the_pod_placed_on_the_gpu(
    nvml: None, core: client.CoreV1Api, namespace: str
) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(5)
    energy_before = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    _busy_pod(core, namespace)
    util = pynvml.nvmlDeviceGetUtilizationRates(handle)
    assert 75 <= util.gpu <= 85 and util.memory > 0
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    assert memory.used > memory.total // 2 and memory.free == memory.total - memory.used
    assert pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU) > 60
    assert pynvml.nvmlDeviceGetPowerUsage(handle) > 400_000
    assert pynvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_RX_BYTES) > 0
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle) == 0
    wait_for(
        lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) > energy_before, what="energy"
    )
    assert (
        core.read_namespaced_pod("busy", namespace).metadata.annotations["kubesim.io/gpus"]
        == "0,1,2,3,4,5,6,7"
    )


def test_unsupported_functions_raise_not_supported(nvml: None) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetFanSpeed(handle)
    assert pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice == 1  # Hopper has GPM


def test_xid_arrives_through_the_event_wait(sim: KubeSim, nvml: None) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(2)
    events = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, events)
    with pytest.raises(pynvml.NVMLError_Timeout):
        pynvml.nvmlEventSetWait(events, 50)
    sim.inject_fault("xid", NODE, gpu=2, xid=31)
    data = pynvml.nvmlEventSetWait(events, 2000)
    assert (data.eventType, data.eventData) == (pynvml.nvmlEventTypeXidCriticalError, 31)
    assert pynvml.nvmlDeviceGetIndex(data.device) == 2
    pynvml.nvmlEventSetFree(events)


def test_gpu_off_the_bus_is_lost_and_leaves_allocatable(
    sim: KubeSim, nvml: None, core: client.CoreV1Api
) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(7)
    events = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, events)
    sim.inject_fault("gpu-lost", NODE, gpu=7)
    assert pynvml.nvmlEventSetWait(events, 2000).eventData == 79
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetUtilizationRates(handle)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetHandleByIndex(7)
    assert core.read_node(NODE).status.allocatable["nvidia.com/gpu"] == "7"
    sim.clear_faults(node=NODE)
    assert core.read_node(NODE).status.allocatable["nvidia.com/gpu"] == "8"
    assert pynvml.nvmlDeviceGetName(handle) == "NVIDIA H100 80GB HBM3"


def test_double_bit_ecc_counts_and_posts_xid_48(sim: KubeSim, nvml: None) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(1)
    events = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, events)
    sim.inject_fault("ecc-dbe", NODE, gpu=1)
    assert pynvml.nvmlEventSetWait(events, 2000).eventData == 48
    uncorrected = pynvml.nvmlDeviceGetTotalEccErrors(
        handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
    )
    assert uncorrected == 1
    assert pynvml.nvmlDeviceGetRemappedRows(handle)[1] == 1


def test_row_remap_thermal_and_nvlink_faults_show_and_clear(sim: KubeSim, nvml: None) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(4)
    sim.inject_fault("row-remap-pending", NODE, gpu=4)
    sim.inject_fault("row-remap-failed", NODE, gpu=4)
    sim.inject_fault("thermal", NODE, gpu=4)
    sim.inject_fault("nvlink-down", NODE, gpu=4, link=3)
    assert pynvml.nvmlDeviceGetRemappedRows(handle)[2:] == (1, 1)
    reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    assert reasons & pynvml.nvmlClocksEventReasonHwThermalSlowdown
    assert reasons & pynvml.nvmlClocksEventReasonSwThermalSlowdown
    hot = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
    assert hot >= 87
    assert (
        pynvml.nvmlDeviceGetNvLinkState(handle, 3) == 0
        and pynvml.nvmlDeviceGetNvLinkState(handle, 2) == 1
    )
    sim.clear_faults(node=NODE)
    assert pynvml.nvmlDeviceGetRemappedRows(handle)[2:] == (0, 0)
    assert pynvml.nvmlDeviceGetNvLinkState(handle, 3) == 1
    assert pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU) <= hot - 50


def test_faults_are_injected_over_http_and_by_the_cli(sim: KubeSim, nvml: None) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(6)
    run = [sys.executable, "-m", "kubesim", "fault"]
    subprocess.run(
        [*run, "inject", "--server", sim.url, "--kind", "thermal", "--node", NODE, "--gpu", "6"],
        check=True,
        capture_output=True,
    )
    assert (
        pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        & pynvml.nvmlClocksEventReasonHwThermalSlowdown
    )
    listed = subprocess.run(
        [*run, "list", "--server", sim.url], check=True, capture_output=True, text=True
    )
    assert '"kind": "thermal"' in listed.stdout
    subprocess.run(
        [*run, "clear", "--server", sim.url, "--node", NODE], check=True, capture_output=True
    )
    assert (
        not pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        & pynvml.nvmlClocksEventReasonHwThermalSlowdown
    )
