"""`manage.py node_token NODE`: issue or rotate a node's agent token and print it once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.models import Node
from monitoring.tokens import rotate_node_token


class Command(BaseCommand):
    help = "Issue (or rotate) the agent token of a node; the old token stops working."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("node", help="the node's Kubernetes name")

    def handle(self, *args: Any, **options: Any) -> None:
        node = Node.objects.filter(name=options["node"]).first()
        if node is None:
            raise CommandError(f"node {options['node']!r}: no such node")
        self.stdout.write(rotate_node_token(node))
