"""`manage.py demo`: migrate, seed once, run every role in one process on a simulated cluster."""

import threading
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal import demo_faults, roles
from portal.env import env_bool
from portal.management.commands.seed_demo import DEMO_PASSWORD, MEMBERS


class Command(BaseCommand):
    help = "Run the all-in-one demo: kubesim, controller, node agents and the web role."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--speed",
            type=float,
            default=10.0,
            help="simulated seconds per real second in the cluster",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError("the demo runs on the embedded defaults; refused in production")
        try:
            faults_every = demo_faults.period_s()
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        call_command("migrate", verbosity=0)
        call_command("seed_demo")
        port, speed, stop = options["port"], options["speed"], threading.Event()
        sim = roles.start_cluster(speed)
        roles.start_controller(stop)
        url = f"http://127.0.0.1:{port}"
        threading.Thread(target=roles.start_agents, args=(sim, url, stop), daemon=True).start()
        if env_bool("DEMO_TRAFFIC"):
            roles.start_traffic(stop)
        if faults_every is not None:
            demo_faults.start_faults(sim, stop, faults_every)
        self.stdout.write(
            f"\nGPU portal demo: {url}/   (cluster: kubesim at {sim.url}, x{speed:g})"
        )
        self.stdout.write(
            f"  logins (password {DEMO_PASSWORD}): admin (platform admin), "
            + ", ".join(f"{u} ({r} of {t})" for u, t, r in MEMBERS)
        )
        self.stdout.write(f"  kubectl --kubeconfig {settings.KUBECONFIG} get pods -A")
        self.stdout.write(
            f"  gpuctl (pip install .): gpuctl login {url} -u bob, then gpuctl ls, gpuctl why JOB"
        )
        self.stdout.write("  API docs: /api/docs/   Django admin: /admin/   Ctrl-C stops\n")
        try:
            uvicorn.run("portal.asgi:application", host="127.0.0.1", port=port, access_log=False)
        finally:
            stop.set()
            sim.stop()
