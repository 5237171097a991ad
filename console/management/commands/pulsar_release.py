"""``manage.py pulsar_release``: give control of the attached Pulsar cluster back to Pulsar by
hand, when the console is down (exactly as the Pulsar page's release: Pulsar's configuration
put back, queued moves cancelled, audited)."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from console.errors import ConsoleError
from console.models import PulsarConnection
from console.pulsar.release import changes_of
from console.services.control import control_release


class Command(BaseCommand):
    help = (
        "Release control of a Pulsar cluster by hand (the console may be down): Pulsar's "
        "shedding and auto-split settings are put back as they were before Fulcrum took "
        "control. Shows what will change and asks, unless --yes."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--connection", help="the connection's name (default: the one in control)"
        )
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
        parser.add_argument("--reason", default="", help="why, for the audit")

    def handle(self, *args: Any, **options: Any) -> None:
        rows = PulsarConnection.objects.filter(mode=PulsarConnection.Mode.CONTROL)
        if options["connection"]:
            rows = rows.filter(name=options["connection"])
        connection = rows.order_by("pk").first()
        if connection is None:
            named = f" named {options['connection']}" if options["connection"] else ""
            raise CommandError(f"no Pulsar connection{named} is under Fulcrum's control")
        self.stdout.write(f"{connection.name} at {connection.admin_url}: will be set back to")
        for change in changes_of(connection.previous_config):
            override = change["override"]
            how = "its override removed" if override is None else f"its override {override} kept"
            self.stdout.write(f"  {change['key']} = {change['effective'] or 'true'} ({how})")
        if not options["yes"]:
            answer = input("Release control? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                raise CommandError("not released")
        who = getpass.getuser()
        why = f"released by hand by {who} on the server" + (
            f": {options['reason']}" if options["reason"] else ""
        )
        try:
            control_release(
                connection.pk,
                actor=None,
                confirm=True,
                now=timezone.now(),
                by="manage.py pulsar_release",
                why=why,
            )
        except ConsoleError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(self.style.SUCCESS(f"{connection.name}: control released ({why})"))
