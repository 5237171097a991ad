"""``manage.py deadman``: the dead-man's process (``console.services.deadman``), a line of the
Procfile of its own: while Fulcrum controls a Pulsar cluster and the shedding loop stops
ticking for ``FULCRUM_DEADMAN_S``, control goes back to Pulsar."""

from __future__ import annotations

import logging
import re
import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections
from django.utils import timezone

from console.services.deadman import DeadmanMemory, deadman_check

log = logging.getLogger("console.deadman")


class Command(BaseCommand):
    # Its own light settings (console.deadman_settings) load none of the apps the checks read.
    requires_system_checks: list[str] = []
    help = (
        "Watch the shedding loop while Fulcrum controls a Pulsar cluster; give control back to "
        "Pulsar (its shedding on again) when the loop has completed no tick for "
        "FULCRUM_DEADMAN_S (default 10 loop intervals). Checks every FULCRUM_DEADMAN_CHECK_S."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--once", action="store_true", help="check once and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        # SIGTERM (honcho, systemd) ends the wait at once; the process's own handlers come back
        # after (a test's process, or one forked from it, must not keep this one).
        before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in before:
            signal.signal(sig, lambda *_: stop.set())
        try:
            memory = DeadmanMemory()
            said = ""
            while True:
                close_old_connections()  # a connection the database dropped is opened again
                now = timezone.now()
                what = deadman_check(now, memory)
                # Logged when what it finds changes (its figures aside: no line every check).
                kind = re.sub(r"\d+", "#", what)
                if kind != said:
                    log.info("%s", what)
                    said = kind
                if options["once"] or stop.wait(settings.FULCRUM_DEADMAN_CHECK_S):
                    return
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)
