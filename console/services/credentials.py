"""Broker credentials: each broker's own token, created, rotated and revoked here (the
``broker_token`` command and the console call these), audited."""

from __future__ import annotations

import secrets
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from console.access import actor_check
from console.errors import ConsoleError
from console.models import AuditEvent, Broker, BrokerCredential
from console.selectors import credential_cache_clear

TOKEN_PREFIX = "fbt_"


def _broker(name: str) -> Broker:
    try:
        return Broker.objects.get(name=name)
    except Broker.DoesNotExist:
        raise ConsoleError(f"unknown broker {name!r}", status=404, field="broker") from None


def _revoke_active(row: Broker, now: datetime) -> int:
    return BrokerCredential.objects.filter(broker=row, revoked_at__isnull=True).update(
        revoked_at=now
    )


def _audit(broker: str, actor: User | None, now: datetime, reason: str) -> None:
    AuditEvent.objects.create(
        at=now, actor=actor, action=AuditEvent.Action.CREDENTIAL, target=broker, reason=reason
    )


def credential_rotate(broker: str, *, actor: User | None) -> tuple[BrokerCredential, str]:
    """Revoke the broker's active tokens and issue a new one. Returns the credential and the
    token, which is shown this once and stored only as its SHA-256.

    Raises:
        ConsoleError: 404 for an unknown broker.
    """
    actor_check(actor, admin=True)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = timezone.now()
    with transaction.atomic():
        row = _broker(broker)
        revoked = _revoke_active(row, now)
        credential = BrokerCredential.objects.create(
            broker=row,
            token_sha256=BrokerCredential.digest(token),
            prefix=token[:12],
            created_at=now,
        )
        earlier = f"; {revoked} earlier token(s) revoked" if revoked else ""
        _audit(broker, actor, now, f"new broker token {credential.prefix}… for {broker}{earlier}")
    credential_cache_clear()
    return credential, token


def credential_revoke(broker: str, *, actor: User | None) -> int:
    """Revoke every active token of the broker; returns how many (0: none was active).

    Raises:
        ConsoleError: 404 for an unknown broker.
    """
    actor_check(actor, admin=True)
    now = timezone.now()
    with transaction.atomic():
        revoked = _revoke_active(_broker(broker), now)
        _audit(broker, actor, now, f"{revoked} broker token(s) of {broker} revoked")
    credential_cache_clear()
    return revoked
