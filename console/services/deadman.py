"""The dead-man: never a Pulsar cluster without a balancer.

Taking control turns Pulsar's own shedding off (``services.control``). If Fulcrum's shedding loop
then stops — the Celery worker or beat dead, stuck, or cut off from Redis — nothing balances the
cluster. The dead-man runs in a process of its own (``manage.py deadman``, a line of the
Procfile, on ``console.deadman_settings``: only the models, not the console's apps), sharing
nothing with the worker and beat but the database, and checks every ``FULCRUM_DEADMAN_CHECK_S``:
while Fulcrum holds control and the loop has completed no tick (a ``ClusterSample``) for
``FULCRUM_DEADMAN_S`` (default 10 loop intervals) since the later of its last tick and the moment
control was taken, it gives control back exactly as a release does: the executor stopped first
(nothing new is sent), each key put back to its previous effective value and the override Fulcrum
introduced removed (``console.pulsar.release``), then observe-only, audited as the dead-man's,
recorded on the connection (``handed_back``) and in ``/metrics``. Pulsar refusing leaves it in
control with the executor stopped, tried again at the next check. Queued moves are cancelled by
the next Pulsar pass, when a worker runs again.

The database may be what failed. Each check keeps in memory what a release needs (the
connection as last read: its URL, credentials and the values to restore) and the last tick it
saw; when the database cannot be read and that tick is older than the limit, it restores
Pulsar from memory (the loop cannot tick without the database either) and records it once the
database answers again.

Imports only the light modules (``services.connections``, ``console.pulsar``, the models): the
process stays small.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction

from console import metrics
from console.models import BalancerConfig, ClusterSample, PulsarConnection
from console.pulsar.release import changes_of, restore, restored_said
from console.services.connections import admin_for, connection_mode_set
from console.services.errors import ConsoleError

log = logging.getLogger(__name__)
BY = "the dead-man"
# The loop interval when no balancer configuration is stored yet (BalancerConfig's default), s.
DEFAULT_LOOP_S = 10.0


def deadman_limit_s() -> float:
    """``FULCRUM_DEADMAN_S``, else 10 loop intervals of the balancer's configuration (s)."""
    if settings.FULCRUM_DEADMAN_S is not None:
        return float(settings.FULCRUM_DEADMAN_S)
    interval = BalancerConfig.objects.values_list("loop_interval_s", flat=True).first()
    return 10.0 * float(interval or DEFAULT_LOOP_S)


@dataclass
class DeadmanMemory:
    """What the dead-man keeps between checks: the controlled connection as last read (a
    detached copy), the start of the silence it measures, the limit, and a release made
    while the database was unreachable (``{"at", "why", "restored"}``), to record later."""

    connection: PulsarConnection | None = None
    since: datetime | None = None
    limit_s: float = 0.0
    pending: dict[str, Any] = field(default_factory=dict)


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


def _check(now: datetime, memory: DeadmanMemory) -> str:
    if memory.pending:
        _record_pending(now, memory)
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
        return f"{connection.name} under control; the loop's last tick {silence:.0f} s ago"
    why = (
        f"the shedding loop completed no tick for {silence:.0f} s (limit {limit:.0f} s, "
        f"FULCRUM_DEADMAN_S; silent since {since:%H:%M:%S} UTC)"
    )
    failed = _release(connection, now, why)
    if failed:
        metrics.DEADMAN_RELEASES.labels(result="failed").inc()
        log.error("the dead-man could not give %s back to Pulsar: %s", connection.name, failed)
        return f"{connection.name}: release failed ({failed}); tried again at the next check"
    metrics.DEADMAN_RELEASES.labels(result="released").inc()
    metrics.PULSAR_CONTROL.set(0)
    memory.connection = memory.since = None
    log.warning("the dead-man gave %s back to Pulsar: %s", connection.name, why)
    return f"{connection.name} handed back to Pulsar: {why}"


def _release(connection: PulsarConnection, now: datetime, why: str) -> str:
    """A release as an admin's (``control_release``): the executor stopped, Pulsar restored,
    observe-only. Returns what failed ("" when released)."""
    with transaction.atomic():
        row = PulsarConnection.objects.select_for_update().get(pk=connection.pk)
        if row.mode != PulsarConnection.Mode.CONTROL:
            return ""  # released meanwhile (an admin, pulsar_release)
        if not row.is_executor_stopped:
            row.is_executor_stopped = True
            row.save(update_fields=["is_executor_stopped"])
        changes = changes_of(row.previous_config)
        try:
            with admin_for(row) as admin:
                failed = restore(admin, changes)
        except ConsoleError as exc:
            failed = [exc.message]
        if failed:
            return "; ".join(failed)
        said = f"Pulsar's configuration restored: {restored_said(changes)}"
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


def _without_database(now: datetime, memory: DeadmanMemory, exc: DatabaseError) -> str:
    """The database cannot be read: release from memory once the silence passes the limit."""
    log.error("the dead-man cannot read the database: %s", exc)
    connection, since = memory.connection, memory.since
    if connection is None or since is None or memory.pending:
        return f"database unreadable ({exc}); nothing under control known, or already released"
    silence = (now - since).total_seconds()
    metrics.DEADMAN_SILENCE.set(silence)
    if silence <= memory.limit_s:
        return f"database unreadable; {connection.name}'s loop silent for {silence:.0f} s"
    changes = changes_of(connection.previous_config)
    try:
        with admin_for(connection) as admin:
            failed = restore(admin, changes)
    except ConsoleError as error:
        failed = [error.message]
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
