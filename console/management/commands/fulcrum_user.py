"""``manage.py fulcrum_user NAME --role viewer|operator|admin [--password-stdin]``: create a
console user with a role, or change an existing user's role (``services.users``)."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.errors import ConsoleError
from console.services.users import ROLES, user_role_set


class Command(BaseCommand):
    help = (
        "Create a console user with a role (viewer reads; operator acts on the cluster; admin "
        "also administers Fulcrum), or change a user's role. A new user without "
        "--password-stdin gets a password, printed once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--role", required=True, choices=ROLES)
        parser.add_argument(
            "--password-stdin", action="store_true", help="read the password from stdin"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        password = sys.stdin.readline().rstrip("\n") if options["password_stdin"] else None
        try:
            user, made = user_role_set(options["name"], options["role"], password=password)
        except ConsoleError as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        self.stdout.write(f"{user.username}: {options['role']}")
        if made:
            self.stdout.write(f"password (shown once): {made}")
