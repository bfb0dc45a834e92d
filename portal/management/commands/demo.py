"""`manage.py demo`: migrate, seed once, and serve the whole portal on the embedded defaults."""

from typing import Any

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.management.commands.seed_demo import DEMO_PASSWORD, MEMBERS


class Command(BaseCommand):
    help = "Run the all-in-one demo: web role on 127.0.0.1:PORT with demo data."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError("the demo runs on the embedded defaults; refused in production")
        call_command("migrate", verbosity=0)
        call_command("seed_demo")
        port = options["port"]
        self.stdout.write(f"\nGPU portal demo: http://127.0.0.1:{port}/")
        self.stdout.write(
            f"  logins (password {DEMO_PASSWORD}): admin (platform admin), "
            + ", ".join(f"{u} ({r} of {t})" for u, t, r in MEMBERS)
        )
        self.stdout.write("  API docs: /api/docs/   Django admin: /admin/   Ctrl-C stops\n")
        uvicorn.run("portal.asgi:application", host="127.0.0.1", port=port, log_level="info")
