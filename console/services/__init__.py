"""Writes: every change to the store goes through a service, atomically and audited."""

from console.services.brokers import broker_state_preview, broker_state_set
from console.services.bundles import (
    bundle_last_move_undo,
    bundle_lookup,
    bundle_split,
    bundle_unload,
    bundle_unload_undo,
)
from console.services.config import shedding_pause_set
from console.services.errors import ConsoleError
from console.services.ingest import load_report_ingest
from console.services.shedding import shedding_tick_run

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
