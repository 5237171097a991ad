"""Console users and their roles (``access.role_of``): a viewer reads, an operator (the
``operators`` group) acts on the cluster, an admin (a superuser) also administers Fulcrum."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Group, User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from console.access import OPERATORS_GROUP, role_of
from console.errors import ConsoleError
from console.models import AuditEvent

ROLES = ("viewer", "operator", "admin")


def user_role_set(
    name: str,
    role: str,
    *,
    password: str | None = None,
    actor: User | None = None,
    now: datetime | None = None,
) -> tuple[User, str | None]:
    """Create user ``name`` with ``role``, or give an existing one that role (and ``password``
    when given), in one transaction, audited.

    Returns:
        (the user, the password made for a new user given none — shown once — else None).

    Raises:
        ConsoleError: 400 naming ``role`` (not one of ``ROLES``), ``name`` (empty, longer
            than 150 characters, or not Django's username characters) or ``password``
            (refused by Django's password validators).
    """
    if role not in ROLES:
        raise ConsoleError(f"role must be one of {', '.join(ROLES)}, not {role!r}", field="role")
    name = name.strip()
    if not name or len(name) > 150:
        raise ConsoleError("name must be 1 to 150 characters", field="name")
    try:
        User.username_validator(name)  # letters, digits and @/./+/-/_ only (no NUL, no space)
    except ValidationError as exc:
        raise ConsoleError(" ".join(exc.messages), field="name") from None
    made: str | None = None
    with transaction.atomic():
        user, created = User.objects.get_or_create(username=name)
        before = "none" if created else role_of(user)
        if created and password is None:
            password = made = secrets.token_urlsafe(18)
        if password is not None:
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise ConsoleError(" ".join(exc.messages), field="password") from None
            user.set_password(password)
        user.is_superuser = user.is_staff = role == "admin"
        user.save()
        operators, _ = Group.objects.get_or_create(name=OPERATORS_GROUP)
        if role == "operator":
            user.groups.add(operators)
        else:
            user.groups.remove(operators)
        AuditEvent.objects.create(
            at=now or timezone.now(),
            actor=actor,
            action=AuditEvent.Action.CREDENTIAL,
            target=f"user {name}",
            reason=f"user {name}: role {before} -> {role}"
            + (" (created)" if created else "")
            + ("; password set" if password is not None and not created else ""),
        )
    return user, made


def users_list() -> list[dict[str, Any]]:
    """Every console user: ``{"name", "role", "lastLogin" (ISO 8601 UTC or None), "active"}``."""
    return [
        {
            "name": u.username,
            "role": role_of(u),
            "lastLogin": u.last_login.isoformat() if u.last_login else None,
            "active": u.is_active,
        }
        for u in User.objects.prefetch_related("groups").order_by("username")
    ]
