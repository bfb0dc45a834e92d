"""Agents for the embedded demo: one thread per simulated node, each on its own fake NVML."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping

from agent.core import DEFAULT_INTERVAL, Agent
from agent.ib import DEFAULT_ROOT
from agent.podresources import PodResources
from agent.transport import HttpTransport


def run_agents(
    libraries_by_node: Mapping[str, object],
    portal_url: str,
    token_for_node: Callable[[str], str],
    stop_event: threading.Event,
    interval: float = DEFAULT_INTERVAL,
    pod_resources_by_node: Mapping[str, str] | None = None,
    ib_roots_by_node: Mapping[str, str] | None = None,
) -> list[threading.Thread]:
    """Start one agent thread per node, posting to `portal_url`, until `stop_event` is set.

    `pod_resources_by_node`: each node's kubelet pod-resources socket, where there is one;
    `ib_roots_by_node`: each node's /sys/class/infiniband (a node left out reads the host's).
    """
    sockets = pod_resources_by_node or {}
    ib_roots = ib_roots_by_node or {}
    threads = []
    for node, library in libraries_by_node.items():
        agent = Agent(
            node,
            HttpTransport(portal_url, functools.partial(token_for_node, node)),
            interval=interval,
            library=library,
            pod_resources=PodResources(sockets[node]) if node in sockets else None,
            ib_root=ib_roots.get(node, DEFAULT_ROOT),
        )
        thread = threading.Thread(
            target=agent.run, args=(stop_event,), name=f"agent-{node}", daemon=True
        )
        thread.start()
        threads.append(thread)
    return threads
