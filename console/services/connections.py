"""A Pulsar connection's own things, light to import: its admin client (credentials, TLS files,
the broker URLs learned, the settings' timeouts), its stored token's encryption, reading it by
id, and recording its mode (observe-only or in control) with the audit. The dead-man's process
(``services.deadman``) uses these without the rest of the services."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import transaction

from console.errors import ConsoleError
from console.models import AuditEvent, PulsarConnection
from console.pulsar.admin import PulsarAdmin, PulsarAdminSetupError, tls_context
from console.pulsar.auth import (
    AuthError,
    OAuth2ClientCredentials,
    StaticToken,
    TokenFile,
    TokenSource,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def _fernet() -> Fernet:
    """The key that encrypts stored tokens: derived from SECRET_KEY (rotating SECRET_KEY makes
    stored tokens unreadable: enter them again)."""
    digest = hashlib.sha256(b"fulcrum pulsar token|" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def token_encrypt(token: str) -> str:
    """A token as stored (Fernet: AES-128-CBC + HMAC-SHA256); "" stays ""."""
    return _fernet().encrypt(token.encode()).decode() if token else ""


def connection_token(connection: PulsarConnection) -> str | None:
    """The connection's token: from its environment variable, else decrypted; None: no token.

    Raises:
        ConsoleError: 409 when the stored token cannot be decrypted (SECRET_KEY changed).
    """
    if connection.token_env:
        return os.environ.get(connection.token_env) or None
    if not connection.token_encrypted:
        return None
    try:
        return _fernet().decrypt(connection.token_encrypted.encode()).decode()
    except InvalidToken:
        raise ConsoleError(
            f"the stored token of {connection.name} cannot be decrypted (SECRET_KEY changed?): "
            "enter it again",
            status=409,
            field="token",
        ) from None


def auth_ways(*, token: bool, token_file: str, oauth2: bool) -> list[str]:
    """The ways a connection is set to authenticate, by the field that sets each (one at most
    is allowed: the admin form and ``connection_auth`` both ask here)."""
    return [
        field
        for field, on in (
            ("token", token),
            ("token_file", bool(token_file)),
            ("oauth2_issuer_url", oauth2),
        )
        if on
    ]


# Token sources kept between passes in this process (an OAuth2 token lives until it expires, a
# token file is read again only when it changes): the connection and its settings -> source.
_sources: dict[tuple[Any, ...], TokenSource] = {}
_sources_lock = threading.Lock()


def connection_auth(connection: PulsarConnection) -> TokenSource | None:
    """Where the connection's bearer token comes from: its token (environment or stored), its
    token file, or OAuth2 client credentials; None: no token (perhaps a client certificate).
    A token file's or OAuth2's source is kept between calls while the connection's settings
    stay the same.

    Raises:
        ConsoleError: 409 naming the field that cannot be used (a token that cannot be
            decrypted, an OAuth2 key file that cannot be read, more than one way set).
    """
    oauth2 = bool(connection.oauth2_issuer_url or connection.oauth2_key_file)
    token = connection_token(connection)
    ways = auth_ways(token=bool(token), token_file=connection.token_file, oauth2=oauth2)
    if len(ways) > 1:
        raise ConsoleError(
            f"{connection.name} has more than one way to authenticate ({', '.join(ways)}): "
            "keep one",
            status=409,
            field=ways[1],
        )
    if not (connection.token_file or oauth2):
        return StaticToken(token, "bearer token") if token else None
    key = (
        connection.pk,
        connection.token_file,
        connection.oauth2_issuer_url,
        connection.oauth2_audience,
        connection.oauth2_key_file,
        connection.oauth2_scope,
        connection.tls_ca_file,
    )
    with _sources_lock:
        kept = _sources.get(key)
        if kept is not None:
            return kept
        try:
            source: TokenSource
            if connection.token_file:
                source = TokenFile(connection.token_file)
            else:
                source = OAuth2ClientCredentials(
                    connection.oauth2_issuer_url,
                    connection.oauth2_audience,
                    connection.oauth2_key_file,
                    connection.oauth2_scope,
                    verify=tls_context(connection.tls_ca_file or None),
                    timeout_s=settings.FULCRUM_PULSAR_READ_TIMEOUT_S,
                )
        except AuthError as exc:
            raise ConsoleError(exc.message, status=409, field=exc.field) from None
        except PulsarAdminSetupError as exc:
            raise ConsoleError(exc.message, status=409, field=exc.field) from None
        if len(_sources) >= 100:
            _sources.clear()
        _sources[key] = source
        return source


def admin_for(connection: PulsarConnection) -> PulsarAdmin:
    """The admin client of a connection (its credentials, TLS CA and client certificate), the
    broker URLs its last observation learned, the timeouts and concurrency of the settings.

    Raises:
        ConsoleError: 409 naming the field that cannot be used (``token``, ``token_file``,
            ``oauth2_…``, ``tls_ca_file``, ``tls_cert_file``).
    """
    try:
        return PulsarAdmin(
            connection.admin_url,
            auth=connection_auth(connection),
            tls_ca_file=connection.tls_ca_file or None,
            tls_cert_file=connection.tls_cert_file or None,
            tls_key_file=connection.tls_key_file or None,
            broker_urls=connection.observation.get("brokerUrls") or None,
            read_timeout_s=settings.FULCRUM_PULSAR_READ_TIMEOUT_S,
            concurrency=settings.FULCRUM_PULSAR_CONCURRENCY,
            deadline_s=settings.FULCRUM_PULSAR_DEADLINE_S,
        )
    except PulsarAdminSetupError as exc:
        raise ConsoleError(exc.message, status=409, field=exc.field) from None


def connection_get(connection_id: int, *, lock: bool = False) -> PulsarConnection:
    """A Pulsar connection by id (``lock``: its row locked until the transaction ends).

    Raises:
        ConsoleError: 404 naming ``connection``.
    """
    rows = PulsarConnection.objects.select_for_update() if lock else PulsarConnection.objects
    try:
        return rows.get(pk=connection_id)
    except PulsarConnection.DoesNotExist:
        raise ConsoleError(
            f"unknown Pulsar connection {connection_id}", status=404, field="connection"
        ) from None


def connection_mode_set(
    connection: PulsarConnection,
    mode: str,
    previous: dict[str, Any],
    actor: User | None,
    now: datetime,
    reason: str,
    *,
    stopped: bool = False,
) -> PulsarConnection:
    """Record the new mode, the executor running (or ``stopped``) and what to restore,
    audited."""
    with transaction.atomic():
        connection = PulsarConnection.objects.select_for_update().get(pk=connection.pk)
        connection.mode = mode
        connection.is_executor_stopped = stopped
        connection.previous_config = previous
        fields = ["mode", "is_executor_stopped", "previous_config"]
        if mode == PulsarConnection.Mode.CONTROL and connection.controlled_at is None:
            connection.controlled_at, connection.handed_back = now, {}
            fields += ["controlled_at", "handed_back"]
        elif mode == PulsarConnection.Mode.OBSERVE:
            connection.controlled_at = None
            fields.append("controlled_at")
        connection.save(update_fields=fields)
        AuditEvent.objects.create(
            at=now,
            actor=actor,
            action=AuditEvent.Action.CONTROL,
            target=connection.name,
            reason=reason,
        )
    return connection
