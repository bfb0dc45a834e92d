"""The kubelet's pod-resources API of each simulated node: `v1.PodResourcesLister/List`.

A real kubelet serves it over gRPC on `/var/lib/kubelet/pod-resources/kubelet.sock`; kubesim
serves one socket per node in a directory of the caller's choosing, answering from what its
kubelet allocated (the GPU UUIDs of each pod it runs). Only `List` is offered, with the fields
the node agent reads: pod name and namespace, container name, resource name and device ids.
Messages are encoded in the protobuf wire format by hand (field numbers of the kubelet's v1
`api.proto`), so no generated code is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

SERVICE = "v1.PodResourcesLister"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class PodDevices:
    namespace: str
    name: str
    container: str
    device_ids: tuple[str, ...]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (strings and nested messages)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_list_response(pods: list[PodDevices], resource: str = GPU_RESOURCE) -> bytes:
    """ListPodResourcesResponse{pod_resources: [PodResources{name, namespace, containers}]}."""
    out = b""
    for pod in pods:
        devices = _field(1, resource.encode()) + b"".join(
            _field(2, device.encode()) for device in pod.device_ids
        )
        container = _field(1, pod.container.encode()) + _field(2, devices)
        message = _field(1, pod.name.encode()) + _field(2, pod.namespace.encode())
        out += _field(1, message + _field(3, container))
    return out


class PodResourcesServer:
    """One node's socket; `pods()` is asked afresh on every call."""

    def __init__(self, path: str, pods: Callable[[], list[PodDevices]]) -> None:
        self.path = path
        self._pods = pods
        self._server = grpc.server(ThreadPoolExecutor(max_workers=2))
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "List": grpc.unary_unary_rpc_method_handler(
                    self._list, request_deserializer=bytes, response_serializer=bytes
                )
            },
        )
        self._server.add_generic_rpc_handlers((handler,))
        self._server.add_insecure_port(f"unix:{path}")

    def _list(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return encode_list_response(self._pods())

    def start(self) -> PodResourcesServer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=None)
