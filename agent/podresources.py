"""Which pod holds which GPU, from the kubelet's pod-resources API.

The kubelet serves `v1.PodResourcesLister` (gRPC) on a unix socket; `List` names every pod on
the node with the devices each container was allocated. For `nvidia.com/gpu` the NVIDIA device
plugin hands out GPU UUIDs, the same string NVML reports, so the agent can label each GPU
sample with the pod using it instead of leaving the portal to guess from the job's placement.

The messages are decoded here from the protobuf wire format (field numbers from the kubelet's
`api.proto`, v1), which needs no generated code: only strings and nested messages are read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import grpc

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
LIST_METHOD = "/v1.PodResourcesLister/List"
GPU_RESOURCE = "nvidia.com/gpu"

# Field numbers of kubelet/pkg/apis/podresources/v1/api.proto.
RESPONSE_POD_RESOURCES = 1  # ListPodResourcesResponse.pod_resources (repeated PodResources)
POD_NAME, POD_NAMESPACE, POD_CONTAINERS = 1, 2, 3  # PodResources
CONTAINER_DEVICES = 2  # ContainerResources.devices (repeated ContainerDevices)
DEVICE_RESOURCE_NAME, DEVICE_IDS = 1, 2  # ContainerDevices

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """Bytes that are not a protobuf message."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise WireError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise WireError("varint too long")


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of one message: ints for varints, else bytes."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == VARINT:
            value, at = _varint(data, at)
        elif wire == LENGTH_DELIMITED:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise WireError(f"field {number}: {size} bytes declared, {len(data) - at} left")
            value, at = data[at : at + size], at + size
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            value, at = data[at : at + size], at + size
        else:
            raise WireError(f"field {number}: unsupported wire type {wire}")
        yield number, value


def _messages(data: bytes, number: int) -> Iterator[bytes]:
    for found, value in fields(data):
        if found == number and isinstance(value, bytes):
            yield value


def _text(data: bytes, number: int) -> str:
    return next((m.decode() for m in _messages(data, number)), "")


def gpu_pods(response: bytes, resource: str = GPU_RESOURCE) -> dict[str, str]:
    """{device id: "namespace/pod"} of every device of `resource` in a List response."""
    owners = {}
    for pod in _messages(response, RESPONSE_POD_RESOURCES):
        owner = f"{_text(pod, POD_NAMESPACE)}/{_text(pod, POD_NAME)}"
        for container in _messages(pod, POD_CONTAINERS):
            for devices in _messages(container, CONTAINER_DEVICES):
                if _text(devices, DEVICE_RESOURCE_NAME) != resource:
                    continue
                for device_id in _messages(devices, DEVICE_IDS):
                    owners[device_id.decode()] = owner
    return owners


class PodResources:
    """A client of one node's kubelet pod-resources socket."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout_s: float = 2.0) -> None:
        self.socket_path, self.timeout_s = socket_path, timeout_s
        self._channel = grpc.insecure_channel(f"unix://{os.path.abspath(socket_path)}")
        self._list = self._channel.unary_unary(
            LIST_METHOD,
            request_serializer=lambda _: b"",  # ListPodResourcesRequest has no fields
            response_deserializer=bytes,
        )

    @classmethod
    def if_present(cls, socket_path: str = DEFAULT_SOCKET) -> PodResources | None:
        """A client when the socket exists (on a Kubernetes node), else None."""
        return cls(socket_path) if os.path.exists(socket_path) else None

    def gpu_pods(self) -> dict[str, str]:
        """{GPU UUID: "namespace/pod"} now; grpc.RpcError when the kubelet does not answer."""
        response: bytes = self._list(None, timeout=self.timeout_s)
        return gpu_pods(response)

    def close(self) -> None:
        self._channel.close()
