"""``manage.py seed_demo``: the demo cluster and its operator (prints the password)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from balancer.simulator.layout import DEMO
from console.services.seed import cluster_seed, config_seed, demo_operator_ensure


class Command(BaseCommand):
    help = (
        "Create the demo cluster (8 brokers, 3 domains, 6 namespaces x 16 bundles), or only its "
        "config when attached to a Pulsar cluster (FULCRUM_PULSAR_URL: the layout is observed), "
        "and the demo operator and admin."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.FULCRUM_PULSAR_URL:
            config_seed()
        else:
            cluster_seed(DEMO)
        for username, file, admin in (
            ("operator", "demo-operator-password", False),
            ("admin", "demo-admin-password", True),
        ):
            name, password = demo_operator_ensure(
                settings.VAR_DIR / file, username=username, admin=admin
            )
            who = "admin (takes and releases control of Pulsar)" if admin else "operator"
            self.stdout.write(
                self.style.SUCCESS(f"Demo {who}: username {name!r}, password {password!r}")
            )
