"""The brokers' ingest credentials, cached for the load-report path."""

from __future__ import annotations

import time

from console.models import (
    BrokerCredential,
)


# token SHA-256 -> (broker, monotonic expiry): a revoked token stops working within this long.
class NotCached(LookupError):
    """The answer is not cached and needs the database (asked with ``cached_only``)."""


_CREDENTIAL_CACHE_S = 2.0


# Every active token's digest -> its broker, and until when (monotonic s) that copy holds. One
# query reads them all: a thousand brokers' tokens cost one lookup per process every 2 s, and a
# stream of made-up tokens costs none.
_credentials: tuple[float, dict[str, str]] | None = None


def credential_broker(token: str, *, cached_only: bool = False) -> str | None:
    """The broker an active token belongs to, None for no such token. Revoked or rotated tokens
    stop within 2 s in every process (at once in the one that revoked them).

    Raises:
        NotCached: ``cached_only`` and the answer needs the database.
    """
    global _credentials
    table = _credentials
    now = time.monotonic()
    if table is None or table[0] <= now:
        if cached_only:
            raise NotCached(token)
        table = _credentials = (
            now + _CREDENTIAL_CACHE_S,
            dict(
                BrokerCredential.objects.filter(revoked_at__isnull=True).values_list(
                    "token_sha256", "broker__name"
                )
            ),
        )
    return table[1].get(BrokerCredential.digest(token))


def credential_cache_clear() -> None:
    """Forget cached token lookups (after a rotation or revocation in this process)."""
    global _credentials
    _credentials = None
