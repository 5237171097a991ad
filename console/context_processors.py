"""Template context every page gets: what an operator must see wherever they are."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from console import loadstore, selectors


def pulsar_conflict(request: Any) -> dict[str, Any]:
    """``pulsar_conflict``: the attached cluster balancing on its own while Fulcrum holds control
    (``selectors.pulsar_conflict_get``), for the banner of every page; nothing when logged out."""
    user = getattr(request, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return {}
    return {"pulsar_conflict": selectors.pulsar_conflict_get()}


def store_outage(request: Any) -> dict[str, Any]:
    """``store_outage``: ``{"since", "asOf" (UTC HH:MM:SS, or None), "error"}`` while the live
    load store (Redis) cannot be reached and the page shows the last figures this process read
    (``loadstore.stale_allowed``); nothing otherwise."""
    found = loadstore.outage_check()
    if found is None or found.since is None:
        return {}

    def clock(t: float | None) -> str | None:
        return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S") if t is not None else None

    return {
        "store_outage": {
            "since": clock(found.since),
            "asOf": clock(found.last_read),
            "error": found.error,
        }
    }
