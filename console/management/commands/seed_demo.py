"""``manage.py seed_demo``: the demo cluster and its operator (prints the password)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from balancer.simulator.layout import DEMO
from console.services.seed import cluster_seed, demo_operator_ensure


class Command(BaseCommand):
    help = "Create the demo cluster (8 brokers, 3 domains, 6 namespaces x 16 bundles) and operator."

    def handle(self, *args: Any, **options: Any) -> None:
        cluster_seed(DEMO)
        username, password = demo_operator_ensure(settings.VAR_DIR / "demo-operator-password")
        self.stdout.write(
            self.style.SUCCESS(f"Demo operator: username {username!r}, password {password!r}")
        )
