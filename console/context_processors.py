"""Template context every page gets: what an operator must see wherever they are."""

from __future__ import annotations

from typing import Any

from console import selectors


def pulsar_conflict(request: Any) -> dict[str, Any]:
    """``pulsar_conflict``: the attached cluster balancing on its own while Fulcrum holds control
    (``selectors.pulsar_conflict_get``), for the banner of every page; nothing when logged out."""
    user = getattr(request, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return {}
    return {"pulsar_conflict": selectors.pulsar_conflict_get()}
