"""The DaemonSet's process: `python -m agent --portal URL --node NAME --token-file F`."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from agent.core import DEFAULT_INTERVAL, Agent
from agent.ib import DEFAULT_ROOT
from agent.podresources import DEFAULT_SOCKET, PodResources
from agent.transport import HttpTransport, token_file_reader


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="agent", description=__doc__)
    parser.add_argument("--portal", required=True, help="the portal's base URL")
    parser.add_argument("--node", required=True, help="this node's Kubernetes name")
    parser.add_argument("--token-file", required=True, help="file holding the node's token")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="seconds")
    parser.add_argument(
        "--pod-resources",
        default=DEFAULT_SOCKET,
        help="the kubelet's pod-resources socket; GPUs are attributed by placement without it",
    )
    parser.add_argument(
        "--ib-root",
        default=DEFAULT_ROOT,
        help="where sysfs lists the InfiniBand devices; none there, no InfiniBand fields",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    transport = HttpTransport(args.portal, token_file_reader(args.token_file))
    pods = PodResources.if_present(args.pod_resources)
    agent = Agent(
        args.node, transport, interval=args.interval, pod_resources=pods, ib_root=args.ib_root
    )
    agent.run(stop)


if __name__ == "__main__":
    main()
