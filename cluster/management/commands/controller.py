"""`manage.py controller`: run the controller role until SIGTERM or Ctrl-C."""

import gc
import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from cluster.controller import Controller
from cluster.kube import KubernetesBackend, load_api_client
from cluster.probes import Probes, serve
from scheduler import Policy, PolicyConfig

GC_THRESHOLDS = (5000, 20, 50)


class Command(BaseCommand):
    help = "Run the controller: scheduling cycles, watches, reconciliation, log followers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, then in-cluster")
        parser.add_argument(
            "--probe-port",
            type=int,
            default=settings.CONTROLLER_PROBE_PORT,
            help="/healthz and /readyz for Kubernetes' probes; 0: none (default: the "
            "CONTROLLER_PROBE_PORT setting)",
        )
        parser.add_argument(
            "--policy",
            choices=[p.value for p in Policy],
            default=settings.SCHEDULER_POLICY,
            help="default: the SCHEDULER_POLICY setting (the dry run's too)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        backend = KubernetesBackend(load_api_client(options["kubeconfig"]))
        controller = Controller(backend, config=PolicyConfig(policy=Policy(options["policy"])))
        self.stdout.write(f"controller {controller.identity} starting")
        # Modules, settings and clients live as long as the process: out of the collector's
        # way, a full collection walks only what the controller holds; and the watches' JSON,
        # allocated by the thousand, has the young generations collected less often.
        gc.set_threshold(*GC_THRESHOLDS)
        gc.freeze()
        server = serve(Probes(controller), options["probe_port"]) if options["probe_port"] else None
        try:
            controller.run(stop)
        finally:
            if server is not None:
                server.shutdown()
