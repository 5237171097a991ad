"""Websocket groups and events. ``publish`` is the only caller of ``group_send``."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)

CLUSTER_GROUP = "cluster"

LOAD_REPORTED = "balancer.load_reported"
DECISION_MADE = "balancer.decision_made"
BUNDLE_MOVED = "balancer.bundle_moved"
CV_SAMPLED = "balancer.cv_sampled"
REPORT_CHANGED = "balancer.report_changed"


def publish(event_type: str, payload: dict[str, Any], group: str = CLUSTER_GROUP) -> None:
    """Send an event to a group once the current transaction commits (now if there is none).

    A failed send is logged, never raised: the decision has been made and stored already.
    """

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(group, {"type": event_type, "payload": payload})
        except Exception:  # the websocket is a view; the store is the truth
            log.warning("could not publish %s to %s", event_type, group, exc_info=True)

    transaction.on_commit(send)


def rankings_delta(
    previous: list[dict[str, Any]] | None, rows: list[dict[str, Any]]
) -> dict[str, Any]:
    """What the dashboards need to go from the rankings they were last sent (``previous``; None:
    nothing yet) to ``rows``: ``{"full", "order" (names, least loaded first), "changed" (the
    rows that are new or differ)}``. A full message carries every row."""
    before = {row["name"]: row for row in previous or ()}
    changed = [row for row in rows if before.get(row["name"]) != row]
    return {
        "full": previous is None,
        "order": [row["name"] for row in rows],
        "changed": rows if previous is None else changed,
    }
