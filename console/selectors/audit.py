"""The audit: its rows filtered, and what stands in the way of undoing one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from django.conf import settings
from django.db.models import Q, QuerySet

from console.errors import ConsoleError
from console.models import (
    AuditEvent,
    Broker,
)
from console.selectors.bundles import bundle_rows

# The audit's filters: query parameter -> what it matches.
AUDIT_FILTERS = {
    "id": "an audit row's id (the row alone)",
    "actor": 'an operator\'s username, or "balancer"',
    "action": "one of " + ", ".join([*AuditEvent.Action.values, "undo"]),
    "broker": "the broker a move left or reached, or the broker acted on",
    "namespace": "a namespace (tenant/ns): its bundles",
    "bundle": "part of a bundle's name",
    "q": "words in the reason or the target",
    "since": "ISO 8601 time, UTC unless it says otherwise (inclusive)",
    "until": "ISO 8601 time, UTC unless it says otherwise (exclusive)",
}


def undo_blockers(events: Sequence[AuditEvent], *, now: datetime | None = None) -> dict[int, str]:
    """For each of ``events`` that is a move of a bundle from one broker to another (the ones
    an undo concerns), by id: "" when an undo can succeed, else why not — older than
    ``FULCRUM_UNDO_WINDOW_S``, the bundle moved on since or is gone, the broker it left is no
    longer active. (The vetoes — cool-down, filters — are for the undo's own preview.)"""
    now = now or datetime.now(UTC)
    moves = [
        e for e in events if e.action == AuditEvent.Action.UNLOAD and e.source and e.destination
    ]
    if not moves:
        return {}
    rows = bundle_rows([e.target for e in moves], skip_invalid=True)
    states = dict(Broker.objects.values_list("name", "state"))
    window = settings.FULCRUM_UNDO_WINDOW_S
    out: dict[int, str] = {}
    for e in moves:
        row = rows.get(e.target)
        owner = row.owner.name if row is not None and row.owner else None
        if (now - e.at).total_seconds() > window:
            out[e.pk] = f"older than the undo window ({window / 60:.0f} min)"
        elif row is None:
            out[e.pk] = "the bundle is gone (split or merged since)"
        elif owner != e.destination:
            out[e.pk] = f"the bundle moved on since: it is on {owner or 'no broker'}"
        elif states.get(e.source) != Broker.State.ACTIVE:
            out[e.pk] = f"{e.source}, the broker it left, is {states.get(e.source, 'gone')}"
        else:
            out[e.pk] = ""
    return out


def audit_events(params: Mapping[str, str]) -> QuerySet[AuditEvent]:
    """The audit, newest first, filtered by ``params`` (``AUDIT_FILTERS``; empty ones ignored).

    Raises:
        ConsoleError: 400 naming the parameter: an unknown action, a time that does not parse,
            a value over 300 characters.
    """
    rows = AuditEvent.objects.select_related("actor")
    values = {}
    for key in AUDIT_FILTERS:
        value = str(params.get(key) or "").strip()
        if len(value) > 300:
            raise ConsoleError(f"{key} is at most 300 characters", field=key)
        if "\x00" in value:  # PostgreSQL text cannot hold it; no name or reason has one
            raise ConsoleError(f"{key} contains a NUL character", field=key)
        values[key] = value
    if values["id"]:
        if not (values["id"].isascii() and values["id"].isdigit()):
            raise ConsoleError("id is an audit row's number", field="id")
        rows = rows.filter(pk=int(values["id"]))
    if values["actor"]:
        rows = (
            rows.filter(actor__isnull=True)
            if values["actor"] == "balancer"
            else rows.filter(actor__username=values["actor"])
        )
    if values["action"] == "undo":  # the audit's verb: an unload that reverses another
        rows = rows.filter(action=AuditEvent.Action.UNLOAD, reverses__isnull=False)
    elif values["action"]:
        if values["action"] not in AuditEvent.Action.values:
            raise ConsoleError(f"action must be {AUDIT_FILTERS['action']}", field="action")
        rows = rows.filter(action=values["action"])
    if values["broker"]:
        broker = values["broker"]
        rows = rows.filter(Q(source=broker) | Q(destination=broker) | Q(target=broker))
    if values["namespace"]:
        rows = rows.filter(target__startswith=values["namespace"].rstrip("/") + "/")
    if values["bundle"]:
        rows = rows.filter(target__icontains=values["bundle"])
    if values["q"]:
        rows = rows.filter(Q(reason__icontains=values["q"]) | Q(target__icontains=values["q"]))
    for key, lookup in (("since", "at__gte"), ("until", "at__lt")):
        if values[key]:
            try:
                when = datetime.fromisoformat(values[key])
            except ValueError:
                raise ConsoleError(
                    f"{key} is not an ISO 8601 time such as 2026-11-22T14:00", field=key
                ) from None
            rows = rows.filter(**{lookup: when if when.tzinfo else when.replace(tzinfo=UTC)})
    return rows
