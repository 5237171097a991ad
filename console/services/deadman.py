"""The dead-man: never a Pulsar cluster without a balancer.

Taking control turns Pulsar's own shedding off (``services.control``). If Fulcrum's shedding loop
then stops — the Celery worker or beat dead, stuck, or cut off from Redis — nothing balances the
cluster. The dead-man runs in a process of its own (``manage.py deadman``, a line of the
Procfile, on ``console.deadman_settings``: only the models, not the console's apps), sharing
nothing with the worker and beat but the database, and checks every ``FULCRUM_DEADMAN_CHECK_S``
while it holds the ``deadman`` lease (one acts at a time; the lease's renewal is its heartbeat,
shown on the Pulsar page). While Fulcrum holds control and the loop has completed no tick (a
``ClusterSample``) for the limit (``deadman_limit_s``) since the later of its last tick and the
moment control was taken, it gives control back as a release does:

1. the executor stopped, committed on its own (no move is sent from then on), marked as the
   dead-man's (``handed_back["releasing"]``);
2. each key put back to its previous effective value, the override Fulcrum introduced removed
   (``console.pulsar.release``);
3. observe-only, audited as the dead-man's, recorded on the connection (``handed_back``) and in
   ``/metrics``.

Pulsar refusing step 2 leaves the executor stopped and the connection in control; the next check
tries again, and if the loop ticks again first, the executor the dead-man stopped is started
again (audited). Queued moves are cancelled by the next Pulsar pass, when a worker runs again.

With ``FULCRUM_DEADMAN_WITHOUT_DATABASE``, a database that cannot be read does not stop it: each
check keeps in memory what a release needs (the connection as last read: its URL, credentials
and the values to restore) and the last tick it saw, restores Pulsar from memory once the
silence passes the limit, and records it when the database answers again. Off by default: a
dead-man cut off alone from the database would hand control back while the loop still runs.

Imports only the light modules (``services.connections``, ``console.leases``,
``console.pulsar``, the models): the process stays small.
"""

from __future__ import annotations

import copy
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from django.conf import settings
from django.db import DatabaseError, transaction

from console import metrics
from console.errors import ConsoleError
from console.leases import DEADMAN, lease_claim, lease_renew
from console.models import AuditEvent, ClusterSample, PulsarConnection
from console.pulsar.release import changes_of, restore, restored_said
from console.selectors.pulsar import deadman_limit_s
from console.services.connections import admin_for, connection_mode_set

log = logging.getLogger(__name__)
BY: Final = "the dead-man"


@dataclass
class DeadmanMemory:
    """What the dead-man keeps between checks: its lease's token, the controlled connection as
    last read (a detached copy), the start of the silence it measures, the limit, and a
    release made while the database was unreachable (``{"at", "why", "restored"}``), to
    record later."""

    token: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    )
    connection: PulsarConnection | None = None
    since: datetime | None = None
    limit_s: float = 0.0
    pending: dict[str, Any] = field(default_factory=dict)
    holds_lease: bool = False


def _silence_start(connection: PulsarConnection) -> datetime | None:
    """The later of the last completed tick and the moment control was taken."""
    last = ClusterSample.objects.order_by("-at").values_list("at", flat=True).first()
    marks = [m for m in (last, connection.controlled_at) if m is not None]
    return max(marks) if marks else None


def deadman_check(now: datetime, memory: DeadmanMemory) -> str:
    """One check (see the module docstring). Never raises: a failure is said and logged, and
    the next check tries again.

    Returns:
        What it found or did, in words (logged by the command when it changes).
    """
    try:
        return _check(now, memory)
    except DatabaseError as exc:
        return _without_database(now, memory, exc)
    except Exception as exc:  # never let one check end the watch
        log.exception("the dead-man's check failed")
        return f"check failed: {type(exc).__name__}: {exc}"


def _lease(now: datetime, memory: DeadmanMemory) -> bool:
    """Hold the dead-man's lease for three checks; False when another dead-man holds it."""
    ttl = 3.0 * settings.FULCRUM_DEADMAN_CHECK_S
    held = memory.holds_lease and lease_renew(DEADMAN, memory.token, now, ttl)
    memory.holds_lease = held or lease_claim(DEADMAN, memory.token, now, ttl)
    return memory.holds_lease


def _check(now: datetime, memory: DeadmanMemory) -> str:
    if memory.pending:
        _record_pending(now, memory)
    if not _lease(now, memory):
        return "another dead-man holds the lease: it watches"
    metrics.DEADMAN_CHECKED.set(now.timestamp())
    connection = (
        PulsarConnection.objects.filter(is_attached=True, mode=PulsarConnection.Mode.CONTROL)
        .order_by("pk")
        .first()
    )
    if connection is None:
        memory.connection = memory.since = None
        metrics.PULSAR_CONTROL.set(0)
        metrics.DEADMAN_SILENCE.set(0)
        return "no Pulsar cluster under Fulcrum's control: nothing to watch"
    limit = deadman_limit_s()
    since = _silence_start(connection)
    memory.connection, memory.since, memory.limit_s = copy.deepcopy(connection), since, limit
    silence = (now - since).total_seconds() if since else 0.0
    metrics.PULSAR_CONTROL.set(1)
    metrics.DEADMAN_SILENCE.set(max(0.0, silence))
    metrics.DEADMAN_LIMIT.set(limit)
    if since is None or silence <= limit:
        if connection.handed_back.get("releasing"):
            return _executor_back(connection, now, silence)
        return f"{connection.name} under control; the loop's last tick {silence:.0f} s ago"
    why = (
        f"the shedding loop completed no tick for {silence:.0f} s (limit {limit:.0f} s; "
        f"silent since {since:%H:%M:%S} UTC)"
    )
    failed = _release(connection.pk, now, why, limit)
    if failed is None:
        return f"{connection.name}: released by someone else meanwhile, or ticking again"
    if failed:
        metrics.DEADMAN_RELEASES.labels(result="failed").inc()
        log.error("the dead-man could not give %s back to Pulsar: %s", connection.name, failed)
        return f"{connection.name}: release failed ({failed}); tried again at the next check"
    metrics.DEADMAN_RELEASES.labels(result="released").inc()
    metrics.PULSAR_CONTROL.set(0)
    memory.connection = memory.since = None
    log.warning("the dead-man gave %s back to Pulsar: %s", connection.name, why)
    return f"{connection.name} handed back to Pulsar: {why}"


def _release(pk: int, now: datetime, why: str, limit: float) -> str | None:
    """A release as an admin's (``control_release``), in the module docstring's three steps.
    Returns what failed ("" when released), or None when there was nothing to do (released
    meanwhile, or the loop ticked since the check)."""
    with transaction.atomic():
        row = PulsarConnection.objects.select_for_update().get(pk=pk)
        since = _silence_start(row)
        if row.mode != PulsarConnection.Mode.CONTROL or (
            since is not None and (now - since).total_seconds() <= limit
        ):
            return None
        row.is_executor_stopped = True
        row.handed_back = {"releasing": True, "by": BY, "at": now.isoformat(), "why": why}
        row.save(update_fields=["is_executor_stopped", "handed_back"])
    # Committed: from here no move is sent. Pulsar is restored outside the row's lock.
    changes, failed = _restore_pulsar(row)
    if failed:
        return "; ".join(failed)
    said = f"Pulsar's configuration restored: {restored_said(changes)}"
    with transaction.atomic():
        row = PulsarConnection.objects.select_for_update().get(pk=pk)
        if row.mode != PulsarConnection.Mode.CONTROL:
            return None
        row = connection_mode_set(
            row,
            PulsarConnection.Mode.OBSERVE,
            {},
            None,
            now,
            f"control handed back to Pulsar by {BY}: {why}; observe-only again, {said}",
        )
        row.handed_back = {"at": now.isoformat(), "by": BY, "why": why}
        row.save(update_fields=["handed_back"])
    return ""


def _restore_pulsar(connection: PulsarConnection) -> tuple[list[dict[str, Any]], list[str]]:
    """Put back what taking control changed in Pulsar: (the changes, what failed)."""
    changes = changes_of(connection.previous_config)
    try:
        with admin_for(connection) as admin:
            return changes, restore(admin, changes)
    except ConsoleError as exc:
        return changes, [exc.message]


def _executor_back(connection: PulsarConnection, now: datetime, silence: float) -> str:
    """The loop ticks again after a release Pulsar refused: the executor the dead-man stopped
    is started again, audited."""
    with transaction.atomic():
        row = PulsarConnection.objects.select_for_update().get(pk=connection.pk)
        if row.mode != PulsarConnection.Mode.CONTROL or not row.handed_back.get("releasing"):
            return f"{row.name} under control; the loop ticks"
        row.is_executor_stopped = False
        row.handed_back = {}
        row.save(update_fields=["is_executor_stopped", "handed_back"])
        AuditEvent.objects.create(
            at=now,
            action=AuditEvent.Action.CONTROL,
            target=row.name,
            reason=f"the shedding loop ticks again (last tick {silence:.0f} s ago) before "
            f"{BY} could give control back to Pulsar: executor started again, Fulcrum keeps "
            "control",
        )
    log.warning("the loop of %s ticks again: executor started again", row.name)
    return f"{row.name}: the loop ticks again, executor started again"


def _without_database(now: datetime, memory: DeadmanMemory, exc: DatabaseError) -> str:
    """The database cannot be read: with ``FULCRUM_DEADMAN_WITHOUT_DATABASE``, release from
    memory once the silence passes the limit; else wait for it."""
    log.error("the dead-man cannot read the database: %s", exc)
    memory.holds_lease = False  # claimed again, checked again, once the database answers
    connection, since = memory.connection, memory.since
    if not settings.FULCRUM_DEADMAN_WITHOUT_DATABASE:
        return f"database unreadable ({exc}); waiting for it (FULCRUM_DEADMAN_WITHOUT_DATABASE off)"
    if connection is None or since is None or memory.pending:
        return f"database unreadable ({exc}); nothing under control known, or already released"
    silence = (now - since).total_seconds()
    metrics.DEADMAN_SILENCE.set(silence)
    if silence <= memory.limit_s:
        return f"database unreadable; {connection.name}'s loop silent for {silence:.0f} s"
    changes, failed = _restore_pulsar(connection)
    if failed:
        metrics.DEADMAN_RELEASES.labels(result="failed").inc()
        return f"database unreadable; restoring {connection.name} failed: {'; '.join(failed)}"
    why = (
        f"the shedding loop completed no tick for {silence:.0f} s (limit "
        f"{memory.limit_s:.0f} s) and the database could not be read ({exc})"
    )
    memory.pending = {"at": now, "why": why, "restored": restored_said(changes)}
    metrics.DEADMAN_RELEASES.labels(result="released").inc()
    metrics.PULSAR_CONTROL.set(0)
    log.warning("the dead-man gave %s back to Pulsar without the database: %s", connection, why)
    return f"{connection.name} handed back to Pulsar (database unreadable): {why}"


def _record_pending(now: datetime, memory: DeadmanMemory) -> None:
    """The database answers again after a release made without it: the connection becomes
    observe-only, audited with when and why it happened. Kept in memory until this commits.

    Raises:
        DatabaseError: the database still does not answer.
    """
    pending, connection = memory.pending, memory.connection
    if connection is None:
        memory.pending = {}
        return
    at: datetime = pending["at"]
    with transaction.atomic():
        row = PulsarConnection.objects.select_for_update().filter(pk=connection.pk).first()
        if (
            row is not None
            and row.mode == PulsarConnection.Mode.CONTROL
            and not (row.controlled_at and row.controlled_at > at)  # not taken again since
        ):
            row.is_executor_stopped = True
            row.save(update_fields=["is_executor_stopped"])
            row = connection_mode_set(
                row,
                PulsarConnection.Mode.OBSERVE,
                {},
                None,
                now,
                f"control handed back to Pulsar by {BY} at {at:%H:%M:%S} UTC: "
                f"{pending['why']}; Pulsar's configuration restored: {pending['restored']} "
                "(recorded once the database answered again)",
            )
            row.handed_back = {"at": at.isoformat(), "by": BY, "why": pending["why"]}
            row.save(update_fields=["handed_back"])
    memory.pending = {}
    memory.connection = memory.since = None
