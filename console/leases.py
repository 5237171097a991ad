"""Leases: what must run once at a time, whatever the process or machine (the shedding tick, the
fold, the history's flush and compaction, a Pulsar pass, a report run, the dead-man), claims a
named row of ``Lease`` until a time, by compare-and-set; every lease's name is here.
``lease_kept`` holds one while its work runs, renewed from a thread, so that each lease can be
short: a worker killed mid-work blinds the next one for at most its time to live. Light to
import (the models only)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Final

from django.db import DatabaseError, connection
from django.utils import timezone

from console.models import Lease

log = logging.getLogger(__name__)

# Every lease, by name.
TICK: Final = "shedding-tick"  # the shedding tick (services.shedding)
PULSAR_SYNC: Final = "pulsar-sync"  # a Pulsar observation pass and its executor (services.pulsar)
FOLD: Final = "load-reports-fold"  # the live store's reports into rows (tasks)
FLUSH: Final = "history-flush"  # the rows into the Parquet history (tasks)
# Held while the history's files are rewritten: a Spark run waits for it before it reads them.
COMPACT: Final = "history-compact"
DEADMAN: Final = "deadman"  # the dead-man's watch (services.deadman)
REPORT_RUN_PREFIX: Final = "report-run:"


def report_run(run_id: int) -> str:
    """The name of the lease a report run's worker keeps while the run is running."""
    return f"{REPORT_RUN_PREFIX}{run_id}"


def lease_claim(name: str, token: str, now: datetime, ttl_s: float) -> bool:
    """Take the lease ``name`` for ``ttl_s`` seconds when it is free or expired (compare-and-set
    on ``locked_until``); True when ``token`` holds it now."""
    Lease.objects.get_or_create(name=name, defaults={"locked_until": now - timedelta(seconds=1)})
    return bool(
        Lease.objects.filter(name=name, locked_until__lt=now).update(
            locked_until=now + timedelta(seconds=ttl_s), holder=token
        )
    )


def lease_renew(name: str, token: str, now: datetime, ttl_s: float) -> bool:
    """Extend the lease to ``now + ttl_s`` if ``token`` holds it and it has not expired by
    ``now``; False when it was lost (expired, perhaps taken by another tick)."""
    return bool(
        Lease.objects.filter(name=name, holder=token, locked_until__gte=now).update(
            locked_until=now + timedelta(seconds=ttl_s)
        )
    )


def lease_held(name: str, now: datetime) -> bool:
    """Someone holds the lease ``name`` now (it has not expired)."""
    return Lease.objects.filter(name=name, locked_until__gte=now).exclude(holder="").exists()


def lease_release(name: str, token: str, now: datetime) -> None:
    """Give the lease back, only if ``token`` still holds it."""
    Lease.objects.filter(name=name, holder=token).update(
        locked_until=now - timedelta(seconds=1), holder=""
    )


def report_run_leases_forget() -> None:
    """Delete the leases of ended report runs (given back: no holder), which are not kept: one
    row a run would otherwise pile up."""
    Lease.objects.filter(name__startswith=REPORT_RUN_PREFIX, holder="").delete()


def lease_token() -> str:
    """A holder's name for ``Lease.holder``: host, process, thread and a unique part."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"


class KeptLease:
    """A lease held while the work it guards runs (``lease_kept``): ``held`` whether it was
    claimed, ``lost`` whether a renewal found it gone (expired: another may hold it now)."""

    def __init__(self, name: str, token: str, ttl_s: float) -> None:
        self.name, self.token, self.ttl_s = name, token, ttl_s
        self.held = False
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _renew(self) -> None:
        try:
            while not self._stop.wait(self.ttl_s / 3):
                try:
                    if not lease_renew(self.name, self.token, timezone.now(), self.ttl_s):
                        self.lost = True
                        log.warning("the lease %s was lost while its work ran", self.name)
                        return
                except DatabaseError as exc:  # tried again at the next renewal
                    log.warning("could not renew the lease %s: %s", self.name, exc)
        finally:
            connection.close()  # this thread's own database connection


@contextmanager
def lease_kept(name: str, ttl_s: float) -> Iterator[KeptLease]:
    """Claim the lease ``name`` for ``ttl_s`` seconds and, while the ``with`` block runs, renew
    it every ``ttl_s / 3`` from a thread of its own: a long piece of work keeps it however long
    it takes, and a process killed in the middle holds it at most ``ttl_s`` more. Yields the
    ``KeptLease`` (``held`` False: another holds it, the block should skip its work); released
    at the end."""
    lease = KeptLease(name, lease_token(), ttl_s)
    lease.held = lease_claim(name, lease.token, timezone.now(), ttl_s)
    if lease.held:
        lease._thread = threading.Thread(target=lease._renew, name=f"lease-{name}", daemon=True)
        lease._thread.start()
    try:
        yield lease
    finally:
        if lease.held:
            lease._stop.set()
            if lease._thread is not None:
                lease._thread.join(timeout=ttl_s)
            lease_release(name, lease.token, timezone.now())
