"""``POST /api/load-reports/`` with a broker token, served as a bare ASGI app beside Django.

Every broker posts a report every few seconds. At that rate Django's request cycle (the
middleware stack, DRF's negotiation, a hop to the sync thread) costs more than checking and
storing the report, so the ASGI entry point (``console.asgi``) hands exactly these requests here:
method POST, path ``INGEST_PATH``, ``Authorization: Broker <token>``, an allowed host, and HTTPS
when ``SECURE_SSL_REDIRECT`` is on. Everything else, including a logged-in user posting a report
or a request without credentials, goes to Django and ``LoadReportViewSet`` unchanged.

The checks, the service and the answers are those of the viewset: ``broker_agent`` for the
token, ``load_report_ingest_async`` for the report, ``load_report_accepted`` and
``console_error_body`` for the body. The usual report runs on the event loop (its one Redis call
awaited); the database is asked, on Django's sync thread, only when a cache misses. A body over
``FULCRUM_MAX_REPORT_BYTES`` is refused before it is read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from console.api.errors import INTERNAL_ERROR, console_error_body, error_body
from console.api.permissions import INVALID_BROKER_TOKEN, broker_agent
from console.api.serializers import load_report_accepted
from console.errors import ConsoleError
from console.selectors import NotCached, database_read
from console.services.ingest import load_report_ingest_async, report_size_check

log = logging.getLogger(__name__)

INGEST_PATH = "/api/load-reports/"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_BROKER = b"Broker "  # as DRF's BrokerTokenAuthentication: exactly


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def handles(scope: Scope) -> bool:
    """Whether a request is a broker's load report this app answers (see the module)."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != INGEST_PATH:
        return False
    authorization = _header(scope, b"authorization")
    if authorization is None or authorization[:7] != _BROKER:
        return False
    if settings.SECURE_SSL_REDIRECT and scope.get("scheme") != "https":
        return False  # Django redirects it
    host, _ = split_domain_port((_header(scope, b"host") or b"").decode("latin-1"))
    return bool(host) and validate_host(host, settings.ALLOWED_HOSTS)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI app for the requests ``handles`` accepts."""
    authorization = (_header(scope, b"authorization") or b"").decode("latin-1")
    declared = _header(scope, b"content-length")
    body: bytes | int
    try:
        body = await _body(receive, int(declared) if declared and declared.isdigit() else 0)
    except _Disconnected:
        return
    status, payload, extra = await _post(authorization, body)
    content = json.dumps(payload, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
        (b"x-content-type-options", b"nosniff"),
        *extra,
    ]
    if settings.SECURE_HSTS_SECONDS and scope.get("scheme") == "https":
        headers.append((b"strict-transport-security", _hsts().encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


def _hsts() -> str:
    """Strict-Transport-Security as Django's SecurityMiddleware writes it."""
    value = f"max-age={settings.SECURE_HSTS_SECONDS}"
    if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
        value += "; includeSubDomains"
    if settings.SECURE_HSTS_PRELOAD:
        value += "; preload"
    return value


class _Disconnected(Exception):
    pass


async def _body(receive: Receive, declared: int) -> bytes | int:
    """The request body, or its size once it is over the limit (the rest is not read)."""
    limit = settings.FULCRUM_MAX_REPORT_BYTES
    if declared > limit:
        return declared
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return size
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _post(
    authorization: str, body: bytes | int
) -> tuple[int, dict[str, Any], list[tuple[bytes, bytes]]]:
    """Status, body and extra headers of one report, as ``LoadReportViewSet`` answers it."""
    try:
        parts = authorization.split()
        agent = None
        if len(parts) == 2:
            try:
                agent = broker_agent(parts[1], cached_only=True)
            except NotCached:
                agent = await database_read(broker_agent, parts[1])
        if agent is None:
            return 401, error_body(401, INVALID_BROKER_TOKEN), [(b"www-authenticate", b"Broker")]
        if isinstance(body, int):
            report_size_check(body)
        assert isinstance(body, bytes)
        entry = await load_report_ingest_async(body, as_broker=agent.broker)
        return 201, load_report_accepted(entry), []
    except ConsoleError as exc:
        return exc.status, console_error_body(exc), []
    except Exception:
        log.exception("unhandled error in the load report ingest")
        return 500, INTERNAL_ERROR, []
