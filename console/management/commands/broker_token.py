"""``manage.py broker_token rotate|revoke BROKER``: a broker's own token (printed once)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.errors import ConsoleError
from console.services.credentials import credential_revoke, credential_rotate


class Command(BaseCommand):
    help = "Issue (rotate) or revoke a broker's own token; a new token is printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["rotate", "revoke"])
        parser.add_argument("broker")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["action"] == "rotate":
                _, token = credential_rotate(options["broker"], actor=None)
                self.stdout.write(token)
            else:
                count = credential_revoke(options["broker"], actor=None)
                self.stdout.write(f"revoked {count} token(s) of {options['broker']}")
        except ConsoleError as exc:
            raise CommandError(exc.message) from None
