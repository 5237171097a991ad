"""Writes: every change to the store goes through a service, atomically and audited.

The names below are imported when first used (PEP 562), not with the package: a process that
needs one service module (the dead-man's, ``console.services.deadman``) does not load them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.errors import ConsoleError  # the services' error (a leaf module)
from console.lazy import lazy_names

if TYPE_CHECKING:
    from console.services.brokers import broker_state_preview, broker_state_set
    from console.services.bundles import (
        bundle_last_move_undo,
        bundle_lookup,
        bundle_split,
        bundle_unload,
        bundle_unload_undo,
    )
    from console.services.config import shedding_pause_set
    from console.services.ingest import load_report_ingest
    from console.services.shedding import shedding_tick_run

_HOMES = {
    "broker_state_preview": "brokers",
    "broker_state_set": "brokers",
    "bundle_last_move_undo": "bundles",
    "bundle_lookup": "bundles",
    "bundle_split": "bundles",
    "bundle_unload": "bundles",
    "bundle_unload_undo": "bundles",
    "load_report_ingest": "ingest",
    "shedding_pause_set": "config",
    "shedding_tick_run": "shedding",
}

__all__ = [
    "ConsoleError",
    "broker_state_preview",
    "broker_state_set",
    "bundle_last_move_undo",
    "bundle_lookup",
    "bundle_split",
    "bundle_unload",
    "bundle_unload_undo",
    "load_report_ingest",
    "shedding_pause_set",
    "shedding_tick_run",
]


if not TYPE_CHECKING:  # mypy reads the imports above, and so checks every name used
    __getattr__ = lazy_names(__name__, _HOMES)
