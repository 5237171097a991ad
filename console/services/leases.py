"""Leases: what must run once at a time, whatever the process or machine (the shedding tick, the
fold, the history's flush and compaction, a Pulsar pass, the dead-man), claims a named row of
``TickLock`` until a time, by compare-and-set. Light to import (the models only)."""

from __future__ import annotations

from datetime import datetime, timedelta

from console.models import TickLock


def lease_claim(name: str, token: str, now: datetime, ttl_s: float) -> bool:
    """Take the lease ``name`` for ``ttl_s`` seconds when it is free or expired (compare-and-set
    on ``locked_until``); True when ``token`` holds it now."""
    TickLock.objects.get_or_create(name=name, defaults={"locked_until": now - timedelta(seconds=1)})
    return bool(
        TickLock.objects.filter(name=name, locked_until__lt=now).update(
            locked_until=now + timedelta(seconds=ttl_s), holder=token
        )
    )


def lease_renew(name: str, token: str, now: datetime, ttl_s: float) -> bool:
    """Extend the lease to ``now + ttl_s`` if ``token`` holds it and it has not expired by
    ``now``; False when it was lost (expired, perhaps taken by another tick)."""
    return bool(
        TickLock.objects.filter(name=name, holder=token, locked_until__gte=now).update(
            locked_until=now + timedelta(seconds=ttl_s)
        )
    )


def lease_held(name: str, now: datetime) -> bool:
    """Someone holds the lease ``name`` now (it has not expired)."""
    return TickLock.objects.filter(name=name, locked_until__gte=now).exclude(holder="").exists()


def lease_release(name: str, token: str, now: datetime) -> None:
    """Give the lease back, only if ``token`` still holds it."""
    TickLock.objects.filter(name=name, holder=token).update(
        locked_until=now - timedelta(seconds=1), holder=""
    )
