"""`manage.py seed_demo`: GPU types, a department with two teams, demo users, quotas, queues, jobs,
and the teams' finished jobs since the start of last month (their usage and statements).

Idempotent: a second run finds the data and changes nothing. Refused in production mode, so demo
accounts exist only in the demo.
"""

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from jobs.actions import submit_job
from jobs.spec import parse_spec
from portal.demo_history import NAMES, seed_history
from quotas.actions import save_gpu_type, save_queue, set_quota
from quotas.models import GpuType
from tenants.actions import add_member, save_team
from tenants.models import Role, Team

DEMO_PASSWORD = "gpu-demo"
GPU_TYPES = [
    ("h100-80g", "NVIDIA-H100-80GB-HBM3", 80, Decimal("2.50")),
    ("a100-80g", "NVIDIA-A100-SXM4-80GB", 80, Decimal("1.40")),
]
QUEUES = [
    ("high", 200, False, 12 * 3600),
    ("normal", 100, False, 24 * 3600),
    ("low-preemptible", 50, True, 72 * 3600),
]
# (team, gpu type, guaranteed, limit); the department's quota is split between its teams.
QUOTAS = [
    ("research", "h100-80g", 48, 64),
    ("research", "a100-80g", 32, 32),
    ("vision", "h100-80g", 24, 48),
    ("vision", "a100-80g", 16, 32),
    ("nlp", "h100-80g", 24, 48),
    ("nlp", "a100-80g", 16, 32),
]
MEMBERS = [
    ("alice", "vision", Role.LEAD),
    ("bob", "vision", Role.MEMBER),
    ("carol", "nlp", Role.MEMBER),
]
JOBS = [
    ("bob", "vision", {"name": "resnet-baseline", "gpu_type": "h100-80g", "gpus_per_node": 1}),
    (
        "bob",
        "vision",
        {"name": "vit-large", "gpu_type": "h100-80g", "gpus_per_node": 8, "nodes": 2},
    ),
    (
        "alice",
        "vision",
        {
            "name": "detr-sweep",
            "gpu_type": "a100-80g",
            "gpus_per_node": 4,
            "queue": "low-preemptible",
        },
    ),
    (
        "carol",
        "nlp",
        {"name": "llama-finetune", "gpu_type": "h100-80g", "gpus_per_node": 8, "queue": "high"},
    ),
]


class Command(BaseCommand):
    help = "Create the demo data (once)."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError("seed_demo creates demo accounts; refused in production mode")
        if Team.objects.filter(slug="research").exists():
            self.stdout.write("demo data already present")
            return
        admin = User.objects.create_superuser("admin", "admin@example.org", DEMO_PASSWORD)
        for name, label, memory, price in GPU_TYPES:
            save_gpu_type(
                acting_user=admin,
                name=name,
                product_label=label,
                memory_gb=memory,
                gpus_per_node=8,
                price_per_gpu_hour=price,
            )
        research = save_team(acting_user=admin, slug="research", name="Research")
        teams = {"research": research}
        for slug, name in (("vision", "Vision"), ("nlp", "Language")):
            teams[slug] = save_team(acting_user=admin, slug=slug, name=name, parent=research)
        for slug, gpu, guaranteed, limit in QUOTAS:
            set_quota(
                teams[slug],
                GpuType.objects.get(name=gpu),
                guaranteed=guaranteed,
                limit=limit,
                acting_user=admin,
            )
        for slug in ("vision", "nlp"):
            for name, priority, preemptible, runtime in QUEUES:
                save_queue(
                    teams[slug],
                    acting_user=admin,
                    name=name,
                    priority=priority,
                    preemptible=preemptible,
                    max_runtime=runtime,
                )
        users = {}
        for username, slug, role in MEMBERS:
            users[username] = User.objects.create_user(
                username, f"{username}@example.org", DEMO_PASSWORD
            )
            add_member(teams[slug], users[username], role=role, acting_user=admin)
        for username, slug, spec in JOBS:
            full = {
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "command": ["python", "train.py"],
                **spec,
            }
            submit_job(teams[slug], parse_spec(full), acting_user=users[username])
        owners = {slug: [users[u] for u, team, _role in MEMBERS if team == slug] for slug in NAMES}
        past = seed_history({slug: teams[slug] for slug in NAMES}, owners)
        self.stdout.write(f"{past} finished jobs since the start of last month")
        self.stdout.write(self.style.SUCCESS("demo data created"))
