"""Agents for the embedded demo: one thread per simulated node, each on its own fake NVML."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping

from agent.core import DEFAULT_INTERVAL, Agent
from agent.podresources import PodResources
from agent.transport import HttpTransport


def run_agents(
    libraries_by_node: Mapping[str, object],
    portal_url: str,
    token_for_node: Callable[[str], str],
    stop_event: threading.Event,
    interval: float = DEFAULT_INTERVAL,
    pod_resources_by_node: Mapping[str, str] | None = None,
) -> list[threading.Thread]:
    """Start one agent thread per node, posting to `portal_url`, until `stop_event` is set.

    `pod_resources_by_node`: each node's kubelet pod-resources socket, where there is one.
    """
    sockets = pod_resources_by_node or {}
    threads = []
    for node, library in libraries_by_node.items():
        agent = Agent(
            node,
            HttpTransport(portal_url, functools.partial(token_for_node, node)),
            interval=interval,
            library=library,
            pod_resources=PodResources(sockets[node]) if node in sockets else None,
        )
        thread = threading.Thread(
            target=agent.run, args=(stop_event,), name=f"agent-{node}", daemon=True
        )
        thread.start()
        threads.append(thread)
    return threads
